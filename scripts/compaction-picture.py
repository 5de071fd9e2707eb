"""Draw the README's picture of a compaction: records and bytes per compacted partition, before and after
one `kafkalog compact` pass over the generated demo log directory (what notebook 02 plots).

    .venv/bin/python scripts/compaction-picture.py [docs/compaction.png]

The numbers are read back from the two log directories with `spark.read.format("kafkalog")`'s batch view,
so the picture shows what is in the files, not what the report claims.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from kafkalog.operations.compact import compact  # noqa: E402
from kafkalog.operations.files import load_config  # noqa: E402
from kafkalog.operations.generate import generate_log_dir  # noqa: E402
from kafkalog.spark import local_session, read_batches  # noqa: E402

NOW = 1_700_100_000_000  # the demo's clock: a day after its records, so tombstones have a horizon to pass


def per_partition(spark, log_dir: str, partitions: list[str]) -> dict[str, tuple[int, int]]:
    """(records, bytes) of each `topic-partition` in `partitions`, read from the files."""
    from pyspark.sql import functions as F

    rows = (
        read_batches(spark, log_dir)
        .groupBy("topic", "partition")
        .agg(F.sum("count").alias("records"), F.sum("size").alias("bytes"))
        .collect()
    )
    found = {f"{r.topic}-{r.partition}": (r.records, r.bytes) for r in rows}
    return {name: found.get(name, (0, 0)) for name in partitions}


def draw(before: dict, after: dict, path: Path) -> None:
    names = sorted(before)
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * len(names) + 1.4), sharey=True)
    for ax, i, what in ((axes[0], 0, "records"), (axes[1], 1, "bytes")):
        ys = range(len(names))
        ax.barh([y + 0.2 for y in ys], [before[n][i] for n in names], height=0.4, label="before", color="#9db4d0")
        ax.barh([y - 0.2 for y in ys], [after[n][i] for n in names], height=0.4, label="after", color="#2f6db5")
        ax.set_yticks(list(ys), names)
        ax.set_title(what)
        ax.invert_yaxis()
        ax.legend(loc="lower right")  # each its own: the small partitions' bars are short at the bottom
    axes[1].xaxis.set_major_formatter(EngFormatter(unit="B"))  # 350 kB, not 350000
    fig.suptitle("kafkalog compact: one Kafka cleaning pass over the demo log directory, per compacted partition")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "docs/compaction.png")
    with tempfile.TemporaryDirectory() as tmp:
        log_dir, compacted, props = f"{tmp}/log", f"{tmp}/compacted", f"{tmp}/topics.properties"
        generate_log_dir(log_dir, preset_name="demo", config_out=props)
        resolver = load_config(props)
        spark = local_session()
        result = compact(spark, log_dir, resolver, NOW, output=compacted)
        names = sorted(f"{s.topic}-{s.partition}" for s in result.plan.chosen)
        draw(per_partition(spark, log_dir, names), per_partition(spark, compacted, names), out)
    print(f"wrote {out}: {len(names)} compacted partitions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
