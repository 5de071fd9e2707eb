"""The `kafkalog` command line: parse arguments, call the library, print results. No logic of its own;
a module per command (or family of commands), and `options` for what they share."""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from ..errors import KafkaLogError
from .compact import _add_compact
from .dump import _add_dump
from .evidence import _add_evidence
from .examples import EXAMPLES
from .export import _add_export
from .generate import _add_generate
from .jars import _add_jars
from .listings import _add_listings
from .options import preflight
from .output import EXIT_FAILED, EXIT_OK, EXIT_PROBLEMS
from .purge import _add_purge, _add_verify_purge
from .repartition import _add_repartition
from .retain import _add_retain
from .txn_report import _add_txn_report
from .validate import _add_validate

__all__ = ["ABOUT", "EXAMPLES", "EXIT_FAILED", "EXIT_OK", "EXIT_PROBLEMS", "build_parser", "main", "preflight"]

ABOUT = """Compact, retain, purge and verify Kafka log directories outside a running broker,
with Kafka's own semantics, on Spark (local mode by default)."""


def main(argv: list[str] | None = None, *, args: argparse.Namespace | None = None) -> int:
    """Run the command `argv` names (default: this process's arguments), or `args`, parsed and checked
    by `preflight` already (a job's: its plan made before Spark started is not made again)."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv[0] if argv and args is None else None)
    if args is None:
        args = parser.parse_args(argv)
    # progress of long runs goes to stderr, so that stdout stays the result
    logging.basicConfig(format="%(name)s: %(message)s", stream=sys.stderr)
    quiet = getattr(args, "quiet", False)
    # ours only: py4j's INFO lines are not news; with --quiet, warnings and errors only
    logging.getLogger("kafkalog").setLevel(logging.WARNING if quiet else logging.INFO)
    from ..operations import progress

    progress.set_mode("off" if quiet else "auto")
    if not hasattr(args, "run"):
        parser.print_help()
        return EXIT_FAILED
    try:
        preflight(args)
        return args.run(args)
    except KafkaLogError as err:
        print(f"kafkalog {args.command}: {err}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `kafkalog dump ... | head` is normal use
        sys.stderr.close()
        return EXIT_OK
    except Exception as err:
        task_error = _executor_error(err)
        if task_error is None:
            raise
        print(f"kafkalog {args.command}: {task_error}", file=sys.stderr)
        return EXIT_FAILED


def _executor_error(err: Exception) -> KafkaLogError | None:
    """The KafkaLogError a Spark task raised, which reaches the driver inside Spark's exception: for the
    Spark jobs no operation turns back into it (spark/errors.py), the error is still one line; so is a
    task whose Python worker was killed."""
    from ..spark.errors import died_error, from_spark_error

    return from_spark_error(err) or died_error(err)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given the command a command line names, of that one alone, so
    that a run imports none of the other commands' modules (their choices: some 0.25 CPU seconds)."""
    parser = argparse.ArgumentParser(
        prog="kafkalog", description=ABOUT, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"kafkalog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for names, add in _COMMANDS:
        if command not in _NAMES or command in names:
            add(commands)
    for name, sub in commands.choices.items():
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
        sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    return parser


_COMMANDS = (  # the command names each adds, in the order `kafkalog --help` lists them
    (("generate",), _add_generate),
    (("dump",), _add_dump),
    (("validate",), _add_validate),
    (
        ("plan",),
        lambda c: _add_compact(c, "plan", "show which partitions compaction would clean, and what it would remove"),
    ),
    (
        ("compact",),
        lambda c: _add_compact(c, "compact", "compact with Kafka's semantics: one cleaning pass per chosen partition"),
    ),
    (("retain",), _add_retain),
    (("purge",), _add_purge),
    (("verify-purge",), _add_verify_purge),
    (("evidence",), _add_evidence),
    (("txn-report",), _add_txn_report),
    (("export",), _add_export),
    (("repartition",), _add_repartition),
    (("log-dirs", "get-offsets", "configs"), _add_listings),
    (("jars",), _add_jars),
)
_NAMES = {name for names, _ in _COMMANDS for name in names}
