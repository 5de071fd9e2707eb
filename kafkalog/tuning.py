"""kafkalog's tuning knobs in one place, as Kafka's `CleanerConfig` gathers its cleaner's (threads,
dedupe buffer, I/O buffer). None changes what is written: each trades memory, tasks or driver work
for time, and the numbers here are the measured ones (docs/benchmarks.md). Modules read them as
`tuning.NAME` where they decide, so that a test or benchmark can set one for a run."""

from __future__ import annotations

# A scan task reads about this many bytes: half of Spark's spark.sql.files.maxPartitionBytes, as
# decoding is CPU-bound (scan/scan_plan.py cuts work units by it).
MAX_BYTES_PER_TASK = 64 * 1024 * 1024

# A compaction's scan tasks are twice the size of other scans' where the bytes allow, so that more
# partitions are read whole by one task, which then decides their keys alone.
COMPACTION_TASK_BYTES = 2 * MAX_BYTES_PER_TASK

# A chosen partition whose scanned segments hold at most this many bytes is cleaned in one task
# (spark/compaction.clean_partition). The task holds the segments' bytes from the read that decides
# to the copy that writes (so each is read once), and a narrow row per record (its key and a few
# numbers, some 60 bytes with short keys: a fifth of the log for records of a few hundred bytes). At
# 512 MiB the two tasks of a 2-core executor hold at most about 1.3 GiB, and the partitions of the
# 1 GiB benchmark (4 x 256 MiB) are cleaned without the JVM seeing a record. A larger partition gains
# more from being spread over several cores (the window path) than it loses to the shuffle.
ONE_TASK_BYTES = 512 << 20

# A partition of more records than this is handed back by its one task, once it has read the batch
# headers, to the path of larger partitions (LARGE_PARTITIONS): the task holds a narrow row per record
# (its key and some numbers) to find each key's latest offset, so its memory grows with the records,
# while a range holds a range's, and the window path's combine takes them in chunks (COMBINE_ROWS).
# Measured (docs/benchmarks.md, `--keys-case`): one task's workers grew from 875 to 2,773 MiB from 1
# to 10 million distinct keys. The 1 GiB benchmark's partitions (1.7 million records each) stay under it.
ONE_TASK_RECORDS = 1 << 21

# A chosen partition too large for one task (ONE_TASK_BYTES, or handed back past ONE_TASK_RECORDS) is
# cleaned by the range path (spark/ranges.py): its output segments, in order, cut into ranges of about
# this many bytes (whole output segments: a larger one is a range of its own), each read by one task
# to map its keys and by one to rewrite it; the keys are merged by as many tasks, a part of them each.
# A task holds its range's bytes and a narrow row per record, as the one-task path holds its
# partition's: a quarter of ONE_TASK_BYTES keeps that well inside a worker, and cuts a 1 GiB partition
# into eight tasks for the executors' cores.
RANGE_BYTES = 128 << 20

# ... and a range's map task reads its records in slices of whole batches of at most this many records
# (one larger batch alone), and the merge cuts the keys into parts of about this many map rows: what
# bounds a task's memory where records are small (a fate per record, a row per distinct key), which
# RANGE_BYTES does not (a 128 MiB segment of 19-byte records is 7 million of them). The rewrite too takes
# its range a slice at a time. The one-task path's bound (ONE_TASK_RECORDS): records of some 150 bytes
# make one slice of a range, and the cut is the one RANGE_BYTES makes.
RANGE_RECORDS = 1 << 20

# Which path cleans the partitions too large for one task: "ranges" (spark/ranges.py: no record passes
# through the JVM, each `.log` byte read twice) or "window" (spark/compaction.decide: every record
# crosses into Spark, which sorts them by key). Both write the same bytes; the window path is kept to
# compare against (tests, `benchmarks/kafka_cleaner.py --large-path window`).
LARGE_PARTITIONS = "ranges"

# An export's latest table decides a partition of at most this many offsets (and ONE_TASK_BYTES) in
# the task that reads it, which holds the last record of each of its keys whole (value, headers); a
# larger partition takes the range path (spark/latest_ranges.py), each of whose map tasks holds at
# most about this many keys (narrow rows: key, offset, version) before it hands them on to Spark's
# merge by key. Measured in one process (docs/benchmarks.md, "Memory against the number of distinct
# keys"): a task holding 2 million distinct keys whole peaked at 670 MiB resident, its read alone at
# 196; a 2-core executor runs two tasks at once.
LATEST_TASK_RECORDS = 1 << 19

# About this many records of a scan task are combined at once on the window path: what bounds a
# Python worker's memory when a task holds millions of small records with distinct keys. Measured:
# from 5 to 10 million keys the workers grew 27% at 2^20, 9% at 2^18, not at 2^17; but at 2^17 the
# partitions of a 256 MB log no longer fit in a chunk, and compaction took 1.5 times as long.
COMBINE_ROWS = 1 << 18

# Producer-state replays of a local log dir that read less than this run on the driver: they read
# about 2 µs a batch there (0.12 s for 260 MB of 14 KiB batches, 1.4 s for 457 MB of 700 B ones),
# while a Spark job costs 0.6 to 0.9 s before its tasks do anything (measured on 2 cores, where the
# executors made planning 0.3 and 0.6 times as fast at those two sizes).
REPLAY_ON_EXECUTORS_BYTES = 1 << 30

# The JVM options of a session the command line starts for a command whose work is all in Python tasks
# (repartition, and compact on the one-task and range paths: Spark only schedules them, and no record
# enters the JVM; the window path, which sorts every record in the JVM, is never the command line's).
# The JVM then compiles with C1 alone: its C2 compiler would spend CPU seconds optimising Spark's
# start-up code on cores the Python workers need. Measured (docs/benchmarks.md, "Repartition"): a
# session started and two jobs of Python tasks run took 16.2 CPU seconds of the JVM and its workers with
# both compilers, 10.4 to 10.9 with C1; `kafkalog compact` of the 1 GiB benchmark over 4 partitions
# took 0.96x the wall time ("The CLI's fixed cost").
PYTHON_TASKS_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

# Partitions swapped at once (storage/swap.replace_in_partitions): each swap is a few renames and
# fsyncs, which wait on the disk rather than the CPU.
SWAP_THREADS = 8

# An incremental export whose Delta table holds at most this many bytes of data files, with changes
# from at most DRIVER_MERGE_RECORDS new records, is merged on the driver by the `deltalake` package
# rather than by delta-spark's MERGE (spark/tables.merge_latest). deltalake rewrites every file that
# holds a matched row (with keys spread over the table, every file), in Rust and without a Spark job;
# delta-spark marks the rows with deletion vectors but runs some 20 Spark jobs, about 3 s of fixed cost
# on 2 cores. Measured (docs/benchmarks.md, "The incremental run"): on the 1 GiB benchmark's table (a
# million rows, 153 MB of Parquet) with 1.1% more records, the incremental run took 1.43 to 1.91 s
# this way against 3.96 to 5.37 s through delta-spark, the driver's resident memory peaking at about
# 1 GB; on a table of 54 MB, 0.96 s against 3.6 s. deltalake's time and the driver's memory grow with
# the table, delta-spark's MERGE much less: past this size the executors' MERGE is the better buy.
DRIVER_MERGE_BYTES = 256 << 20
DRIVER_MERGE_RECORDS = 1 << 20

# Set around delta-spark's MERGE alone (spark/tables.merge). With deletion vectors Delta's MERGE
# writes only the rows it changes, but it finds them with a left outer join of the new rows with the
# (partition, key) of every row of the table, which Spark sorts on both sides (a sort-merge join over
# a million keys for a few thousand new rows). With this threshold, adaptive execution, once the
# shuffle has run, builds a hash table of a side each of whose shuffled partitions is under it (the
# new rows) instead of sorting; a side with a bigger partition keeps the sort-merge join, so memory
# stays bounded. Measured at 1 M keys (docs/benchmarks.md, "The incremental run"): a quarter less
# JVM CPU for the incremental run.
MERGE_CONF = {"spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": str(64 << 20)}

# A purge's key list this long or shorter is broadcast to the scan's tasks; a longer one is joined
# by a shuffle.
BROADCAST_KEYS = 1_000_000

# -- scan planning (scan/scan_plan.py) ---------------------------------------------------------------------

# What opening a work unit's file costs a task, in bytes, when tasks are packed: a request's worth on
# an object store, as Spark's spark.sql.files.openCostInBytes (4 MiB) counts it ...
OPEN_COST = 4 * 1024 * 1024
# ... and next to nothing on a local disk, where what a partition or an output segment costs a task
# beyond its bytes is a few small files opened.
SMALL_OPEN_COST = 64 * 1024
# Asking for more tasks than the bytes fill (a scan's min_tasks, the cores) never cuts a range smaller
# than this: below a MiB, a task's fixed cost outweighs what another core gains.
MIN_SPLIT_BYTES = 1024 * 1024
# An offset range seeks with the offset index only in segments at least this big: reading the index
# costs a file open, which a smaller segment read whole does not repay.
SEEK_MIN_BYTES = 1024 * 1024

# -- decoding (scan/views.py) and reading segments (storage/segment.py) -----------------------------------

# Rows per Arrow record batch a scan task yields: large enough that Arrow's and Spark's per-batch
# costs vanish, small enough that a batch of wide records stays a few MiB.
BATCH_ROWS = 64 * 1024
# The narrow view scans a window of v2 batches in one vectorised pass (codec scan_batches) once it
# holds this many batches or decompressed bytes: enough to pay numpy's cost per call once for
# thousands of records, few enough to keep the held-back sections small.
VIEW_WINDOW_BATCHES = 64
VIEW_WINDOW_BYTES = 1 << 20
# A segment is read in chunks of this size: one request per 8 MiB on an object store, and a batch
# straddling a chunk's end costs one more read.
READ_CHUNK_BYTES = 8 * 1024 * 1024
# The first read for a segment's first batch (its timestamp, for retention), or for one batch read
# alone at a position (LogSegment.batch_at): enough for most batches; a larger one is read whole.
FIRST_BATCH_CHUNK_BYTES = 64 * 1024
# The read for the batches after the last offset-index entry (a segment's last offset): about
# index.interval.bytes (4 KiB by default) past the entry, with room for a large batch.
TAIL_CHUNK_BYTES = 256 * 1024

# A header-only read of a local segment (a producer-state replay, a segment's tail and first batch):
# a batch of at least SKIP_RECORDS_BYTES is read by its header alone and its records are skipped by
# its length; the reads start at HEADER_READ_BYTES and double while they hold whole batches. A read
# costs about 5 µs and reading 1 KiB about 0.5 µs more (user and system time of 8 MiB reads), so
# skipping pays from about 10 KiB: 1 GiB of 57 KiB batches took 0.12 s of CPU rather than 0.30 s.
# Object stores keep their chunked reads (a request costs more than the bytes it saves).
HEADER_READ_BYTES = 512
SKIP_RECORDS_BYTES = 32 * 1024

# -- writing segments (storage/segment_writer.py, storage/rewrite.py) --------------------------------------

# `.log` bytes a log writer gathers before one write to the file system: one request per MiB on an
# object store, few system calls on a local disk.
WRITE_BUFFER_BYTES = 1024 * 1024
# Batches a segment rewrite splices together: numpy's cost per call is paid once per window.
SPLICE_WINDOW_BATCHES = 64
