"""`kafkalog jars fetch`: delta-spark's jars ahead of time, for machines that cannot reach Maven Central."""

from __future__ import annotations

import os

from .output import EXIT_OK


def _add_jars(commands) -> None:
    p = commands.add_parser(
        "jars",
        help="fetch delta-spark's jars for the installed Spark now (through Ivy, from Maven Central), so that "
        "no later run resolves them",
    )
    p.add_argument("action", choices=["fetch"], help="fetch: resolve the jars and write their manifest")
    p.add_argument(
        "--to",
        metavar="DIR",
        help="copy the jars and their manifest into DIR (for a machine without Maven Central: set "
        "KAFKALOG_JARS_DIR=DIR there); default: keep them in Ivy's cache and the manifest in kafkalog's "
        "cache ($KAFKALOG_JARS_DIR, else ~/.cache/kafkalog/jars)",
    )
    p.set_defaults(run=_run_jars)


def _run_jars(args) -> int:
    from ..spark.session import fetch_jars

    key, jars, manifest = fetch_jars(os.path.abspath(args.to) if args.to else None)
    size = sum(os.path.getsize(jar) for jar in jars) / 1e6
    print(f"{len(jars)} jars ({size:.1f} MB) of {key}")
    print(f"manifest: {manifest}")
    if args.to:
        print(f"where Maven Central cannot be reached, copy {args.to} there and set KAFKALOG_JARS_DIR to it")
    return EXIT_OK
