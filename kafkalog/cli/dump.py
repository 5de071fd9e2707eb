"""`kafkalog dump`."""

from __future__ import annotations

import sys

from ..errors import ConfigError
from ..topics import CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from .output import EXIT_OK


def _add_dump(commands) -> None:
    p = commands.add_parser("dump", help="print batches (and records) as JSON Lines, like kafka-dump-log")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="log dir, partition dir, or segment/index/snapshot/checkpoint file"
    )
    p.add_argument(
        "--files",
        action="append",
        default=[],
        metavar="PATH[,PATH...]",
        help="more paths, comma-separated, as kafka-dump-log takes them",
    )
    p.add_argument("--records", action="store_true", help="also one object per record")
    for part in ("key", "value"):
        p.add_argument(
            f"--{part}-decoder",
            choices=("base64", "string", "hex", "json"),
            help=f"how a record's {part} is shown (default base64; kafka-dump-log's default is string; "
            "implies --records)",
        )
    for name, topic in (
        ("offsets", CONSUMER_OFFSETS_TOPIC),
        ("transaction-log", TRANSACTION_STATE_TOPIC),
        ("cluster-metadata", "__cluster_metadata (and KRaft snapshots)"),
        ("share-group-state", SHARE_GROUP_STATE_TOPIC),
        ("remote-log-metadata", "__remote_log_metadata (tiered storage)"),
    ):
        p.add_argument(
            f"--{name}-decoder",
            action="append_const",
            const=name,
            dest="decoders",
            default=[],
            help=f"decode {topic} records (implies --records)",
        )
    p.add_argument("--txn-index", action="store_true", help="also dump .txnindex entries")
    p.add_argument("--snapshot", action="store_true", help="also dump producer-state snapshots")
    p.add_argument("--skip-record-metadata", action="store_true", help="records without timestamp, sizes and headers")
    p.add_argument("--max-bytes", type=int, metavar="N", help="only the batches within each file's first N bytes")
    p.set_defaults(plan=_plan_dump, run=_run_dump)


def _plan_dump(args):
    from ..operations.dump import plan_dump

    paths = args.paths + [path for listed in args.files for path in listed.split(",") if path]
    if not paths:
        raise ConfigError("dump needs a PATH or --files PATH[,PATH...]")
    return plan_dump(
        paths,
        lazy=True,  # large keys and values streamed to stdout (write_json_lines)
        records=args.records,
        decoders=args.decoders,
        txn_index=args.txn_index,
        snapshots=args.snapshot,
        skip_record_metadata=args.skip_record_metadata,
        max_bytes=args.max_bytes,
        key_decoder=args.key_decoder,
        value_decoder=args.value_decoder,
    )


def _run_dump(args) -> int:
    from ..operations.dump import run_dump
    from ..operations.dump_json import write_json_lines

    write_json_lines(run_dump(args.planned), sys.stdout)
    return EXIT_OK
