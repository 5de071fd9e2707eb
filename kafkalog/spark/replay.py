"""Producer-state replays on the executors: what a compaction's plan takes where the replays read
too much for the driver (tuning.REPLAY_ON_EXECUTORS_BYTES) or from an object store."""

from __future__ import annotations

import functools

from .. import tuning
from ..errors import KafkaLogError
from ..scan.views import filesystem
from ..storage.partition import Partition
from ..storage.producer_state import replay_bytes, replay_partition
from .errors import returned_error, worker_error
from .scan import pack_tasks
from .session import started
from .tasks import run_tasks


def replays(spark, root: str, is_local: bool, parts: list[Partition]):
    """The `replay` that a compaction's plan (operations/compact._log_to_clean) takes for `parts`, of
    the log dir `root`: `replay_partition` on the driver, or, with a session and at least
    tuning.REPLAY_ON_EXECUTORS_BYTES to read (or an object store to read them from), the replays run
    on the executors in tasks packed by the bytes each reads (`spark` may be a Future of the session, waited
    for only then): a partition's replay as its task made
    it, or the error that stopped it, raised on the driver (a task returns errors as data, so that
    one partition's fails none of the others)."""
    if spark is None:
        return replay_partition
    sizes = {part.path: replay_bytes(part) for part in parts}
    if is_local and sum(sizes.values()) < tuning.REPLAY_ON_EXECUTORS_BYTES:
        return replay_partition
    spark = started(spark)
    tasks = pack_tasks(spark, list(sizes), sizes.__getitem__)
    paths = [path for task in tasks for path in task]
    replayed = dict(zip(paths, run_tasks(spark, tasks, functools.partial(_replay_task, root))))

    def replay(part: Partition):
        result = replayed[part.path]
        if isinstance(result, str):
            raise returned_error(result)
        return result

    return replay


def _replay_task(root: str, path: str):
    """Executor side: the replay of the partition directory at `path` (in the filesystem of the log
    directory `root`), or its error as `worker_error` text."""
    try:
        return replay_partition(Partition.open(filesystem(root), path))
    except KafkaLogError as err:
        return worker_error(err)
