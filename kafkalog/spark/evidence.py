"""Evidence of a purge on Spark: the hashes of the segments it rewrites, and the scan that finds the
keys of a ledger in a log directory by their fingerprints alone.

Both run on the executors. The hashes: one task per few output segments (packed by bytes), each
reading its staged `.log.cleaned` once, and its source `.log` only where the rewrite did not hash it
as it read it. The scan: the narrow view's keys (no
values), each key's HMAC computed where it is read, joined with the ledger's fingerprints; the
secret reaches the tasks inside the function they run, never as a literal of the plan (plans are
shown in Spark's UI and event logs), and the keys never reach the driver.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ..storage.ledger import copy_identity, file_sha256, fingerprint, log_dir_identity, segments_table
from ..storage.naming import segment_file_name
from ..storage.outputs import OutputSegment, OutputStats
from ..storage.rewrite import CLEANED
from .scan import narrow_scan, pack_tasks
from .tasks import run_tasks

# what the verification reads of each record: where it is, whether it can be a kept tombstone
SCANNED = ("topic", "partition", "segmentBaseOffset", "position", "offset", "key", "valueIsNull", "magic")


def segment_hashes(
    spark, roots: Sequence[str], outputs: Sequence[OutputSegment], sources: Sequence[str | None] = ()
) -> list[tuple[str, str]]:
    """(SHA-256 of the source `.log`, of the staged `.log.cleaned`) of each output segment of a purge,
    in order (one source segment each, of the copy at roots[output.copy]), written and not yet swapped
    in: one Spark job for every copy's. `sources`: each source's hash where its rewrite hashed it as
    it read it (OutputStats.source_sha256); the others are read again."""
    for o in outputs:
        assert len(o.bases) == 1, "a purge rewrites each segment into one of its own"

    def hashes(job: tuple) -> tuple:
        from ..scan.views import filesystem_and_path

        output, before = job
        fs, root = filesystem_and_path(roots[output.copy])
        part = fs.join(root, f"{output.topic}-{output.partition}")
        log = fs.join(part, segment_file_name(output.base_offset, ".log"))
        return before or file_sha256(fs, log), file_sha256(fs, log + CLEANED)

    jobs = list(zip(outputs, [*sources, *[None] * (len(outputs) - len(sources))]))
    return run_tasks(spark, pack_tasks(spark, jobs, lambda job: job[0].nbytes), hashes)


def record_segments(
    spark,
    ledger: str,
    copies: Sequence,
    outputs: Sequence[OutputSegment],
    stats: Sequence[OutputStats],
    *,
    run_id: str,
    purged_at_ms: int,
    secret: bytes,
) -> int:
    """Hash the rewritten segments of every copy (`copies`: the purge's, each with its `log_dir`,
    `opened` and the `name` the ledger knows it by; the outputs staged, not swapped in) in one Spark
    job, and add their rows to the ledger's segments table in one commit (but rows it holds already:
    the same rewrite staged again by a rerun). Returns how many rows were added."""
    from .ledger import write_ledger_segments

    hashed = {(s.copy, s.topic, s.partition, s.base_offset): s.source_sha256 for s in stats}
    known = [hashed.get((o.copy, o.topic, o.partition, o.base_offset)) for o in outputs]
    found = segment_hashes(spark, [c.log_dir for c in copies], outputs, known)
    rows = []
    for i, c in enumerate(copies):
        broker_id, directory_id = copy_identity(c.opened.meta_properties())
        mine = [(s, h) for o, s, h in zip(outputs, stats, found) if o.copy == i]
        rows += segment_evidence(mine, log_dir=log_dir_identity(c.name), broker_id=broker_id, directory_id=directory_id)
    return write_ledger_segments(
        spark, ledger, segments_table(rows, run_id=run_id, purged_at_ms=purged_at_ms, secret=secret)
    )


def segment_evidence(
    segments: Sequence[tuple[OutputStats, tuple[str, str]]],
    *,
    log_dir: str,
    broker_id: int | None,
    directory_id: str | None,
) -> list[dict]:
    """The segments table's columns (storage/ledger.py SEGMENTS_SCHEMA, from `log_dir` on) of each
    rewritten segment of one copy: what its rewrite counted, and its hashes (before, after)."""
    return [
        {
            "log_dir": log_dir,
            "broker_id": broker_id,
            "directory_id": directory_id,
            "topic": s.topic,
            "partition": s.partition,
            "base_offset": s.base_offset,
            "records_before": s.records_in,
            "records_after": s.records_out,
            "bytes_before": s.bytes_in,
            "bytes_after": s.bytes_out,
            "sha256_before": before,
            "sha256_after": after,
        }
        for s, (before, after) in segments
    ]


# the scope of a ledger's fingerprints, one row each: every topic but internal ones (`all_topics`),
# else the topics listed
SCOPE_SCHEMA = "fingerprint string, all_topics boolean, topics array<string>"
LISTED_HITS = 100_000  # the records of purged keys listed (and tombstones checked) one by one; beyond, counted


def find_fingerprints(spark, log_dirs: dict, scope, secret: bytes, *, broadcast: bool = True):
    """Where the keys of `scope` (rows of SCOPE_SCHEMA) are in `log_dirs` (name -> (path, the topics
    to read)), in one Spark job over every copy: per (log_dir, topic, partition), the data records
    read (`records`), those with a key in scope (`hits`) and the smallest offset of a hit that cannot
    be a tombstone (`first_offset`). Then, only if there are hits, a second job reads the partitions
    with hits again and lists up to LISTED_HITS of them, with where each lies (to read a possible
    tombstone's headers). Returns (partitions, hit rows) as lists of Rows."""
    from pyspark.sql import functions as F

    partitions = (
        _marked(spark, log_dirs, scope, secret, broadcast)
        .groupBy("log_dir", "topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.col("hit").cast("long")).alias("hits"),
            F.min(F.when(F.col("hit") & ~_maybe_tombstone(), F.col("offset"))).alias("first_offset"),
        )
        .collect()
    )
    with_hits = [(r.log_dir, r.topic, r.partition) for r in partitions if r.hits]
    if not with_hits:
        return partitions, []
    again = {
        name: (path, {t for n, t, _ in with_hits if n == name}, {p for n, _, p in with_hits if n == name})
        for name, (path, _) in log_dirs.items()
    }
    chosen = spark.createDataFrame(with_hits, "log_dir string, topic string, partition int")
    rows = (
        _marked(spark, again, scope, secret, broadcast)
        .join(F.broadcast(chosen), ["log_dir", "topic", "partition"], "left_semi")
        .where("hit")
        .withColumn("tombstone", _maybe_tombstone())
        .select("log_dir", "topic", "partition", "segmentBaseOffset", "position", "offset", "tombstone", "fingerprint")
        .orderBy("log_dir", "topic", "partition", "offset")
        .limit(LISTED_HITS)
        .collect()
    )
    return partitions, rows


def _maybe_tombstone():
    """A record that may be a tombstone a purge kept: a null value in a v2 batch (headers unread)."""
    from pyspark.sql import functions as F

    return F.col("valueIsNull") & (F.col("magic") >= 2)


def _marked(spark, log_dirs: dict, scope, secret: bytes, broadcast: bool):
    """The data records of `log_dirs`, fingerprinted, with `hit`: their key is in `scope`, in a topic
    of its scope (every topic but internal ones, or those listed)."""
    from pyspark.sql import functions as F

    data = _fingerprinted(spark, log_dirs, secret)
    joined = data.join(F.broadcast(scope) if broadcast else scope, "fingerprint", "left")
    internal = F.col("topic").startswith("__")
    hit = F.col("all_topics") & ~internal | F.coalesce(F.array_contains("topics", F.col("topic")), F.lit(False))
    return joined.withColumn("hit", F.coalesce(hit, F.lit(False)))


def _fingerprinted(spark, log_dirs: dict, secret: bytes):
    """The data records of every log directory's topics (name -> (path, topics[, partition numbers])),
    named by `log_dir`: SCANNED's columns, the key replaced by its `fingerprint` (null without a key),
    computed on the executors."""
    from functools import reduce

    from pyspark.sql import functions as F

    from ..scan.views import NARROW_SCHEMA
    from .scan import spark_schema

    kept = [c for c in SCANNED if c != "key"]
    out = pa.schema([NARROW_SCHEMA.field(c) for c in kept] + [pa.field("fingerprint", pa.string())])

    def fingerprints(batches):
        memo: dict = {}
        for batch in batches:
            fps = [
                None if k is None else memo.get(k) or memo.setdefault(k, fingerprint(secret, k))
                for k in batch.column("key").to_pylist()
            ]
            yield pa.RecordBatch.from_arrays([batch.column(c) for c in kept] + [pa.array(fps, pa.string())], schema=out)
            if len(memo) > 100_000:  # a memo for repeated keys, not a copy of the log's key space
                memo.clear()

    frames = [
        narrow_scan(spark, path, topics=sorted(topics), partitions=_numbers(rest), columns=[*SCANNED, "isControl"])
        .where(~F.col("isControl"))
        .select(*SCANNED)
        .mapInArrow(fingerprints, spark_schema(out))
        .withColumn("log_dir", F.lit(name))
        for name, (path, topics, *rest) in log_dirs.items()
        if topics
    ]
    if not frames:
        return spark.createDataFrame([], spark_schema(out)).withColumn("log_dir", F.lit(None).cast("string"))
    return reduce(lambda a, b: a.unionByName(b), frames)


def _numbers(rest) -> list | None:
    return sorted(rest[0]) if rest else None
