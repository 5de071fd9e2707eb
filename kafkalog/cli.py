"""The `kafkalog` command line: parse arguments, call the library, print results. No logic of its own."""
from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .errors import KafkaLogError

EXIT_OK, EXIT_PROBLEMS, EXIT_FAILED = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return EXIT_FAILED
    try:
        return args.run(args)
    except KafkaLogError as err:
        print(f"kafkalog {args.command}: {err}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `kafkalog dump ... | head` is normal use
        sys.stderr.close()
        return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkalog", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"kafkalog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_dump(commands)
    return parser


def _add_dump(commands) -> None:
    p = commands.add_parser("dump", help="print batches (and records) as JSON Lines, like kafka-dump-log")
    p.add_argument("paths", nargs="+", metavar="PATH", help="log dir, partition dir, or segment/index/snapshot file")
    p.add_argument("--records", action="store_true", help="also one object per record")
    p.add_argument("--offsets-decoder", action="store_true", help="decode __consumer_offsets keys and values")
    p.add_argument("--txn-index", action="store_true", help="also dump .txnindex entries")
    p.add_argument("--snapshot", action="store_true", help="also dump producer-state snapshots")
    p.set_defaults(run=_run_dump)


def _run_dump(args) -> int:
    from .storage.dump import dump_paths
    out = sys.stdout
    for obj in dump_paths(args.paths, records=args.records, offsets_decoder=args.offsets_decoder,
                          txn_index=args.txn_index, snapshots=args.snapshot):
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    return EXIT_OK
