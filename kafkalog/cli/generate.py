"""`kafkalog generate`."""

from __future__ import annotations

from .options import add_input
from .output import EXIT_OK, save_report


def _add_generate(commands) -> None:
    from ..operations.generate import PRESETS

    p = commands.add_parser("generate", help="write a realistic, byte-reproducible Kafka log directory")
    p.add_argument(
        "log_dir",
        metavar="LOG_DIR",
        help="where to write the log directory (must not exist, or be empty); a path or URI",
    )
    p.add_argument("--preset", default="demo", choices=sorted(PRESETS), help="what to generate (default demo)")
    add_input(p, "--spec", metavar="FILE", help="a JSON GeneratorSpec instead of a preset")
    p.add_argument("--seed", type=int, default=None, help="seed: the same seed gives identical output")
    p.add_argument("--records", type=int, help="records per partition, for every topic")
    p.add_argument("--offsets-partitions", type=int, help="partitions of __consumer_offsets")
    p.add_argument(
        "--config-out",
        metavar="FILE",
        help="also write the topics' configurations as a properties file for --config-file",
    )
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="also write the whole manifest as JSON (every partition's offsets, every committed offset)",
    )
    p.set_defaults(run=_run_generate)


def _run_generate(args) -> int:
    from ..operations.generate import generate_log_dir

    summary = generate_log_dir(
        args.log_dir,
        preset_name=args.preset,
        spec_file=args.spec,
        seed=args.seed,
        records=args.records,
        offsets_partitions=args.offsets_partitions,
        config_out=args.config_out,
    )
    save_report(args.manifest, summary.to_dict())
    print(summary.summary())
    for path, what in ((args.config_out, "the topics' configurations, for --config-file"), (args.manifest, "manifest")):
        if path:
            print(f"{what}: {path}")
    return EXIT_OK
