"""Tasks done of total of the Spark jobs a phase runs: what the progress of a Spark phase counts
(kafkalog/operations/progress.py shows it).

A classic session's status tracker is polled; a Spark Connect session has no SparkContext and no
status tracker, so there the session's progress handler (pyspark 4) collects the same counts from
the server's progress messages. Nothing here touches `sparkContext` on a Connect session.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from .context import spark_context


def task_feed(spark) -> TrackedTasks | ConnectTasks | None:
    """A feed of (tasks done, tasks in total) over the Spark jobs started from now on, until closed;
    None when the session offers no counts."""
    context = spark_context(spark)
    if context is None:
        return ConnectTasks(spark) if hasattr(spark, "registerProgressHandler") else None
    return TrackedTasks(context.statusTracker())


class TrackedTasks:
    """The tasks of the jobs numbered from the first job after this feed was made, from Spark's status
    tracker. Job ids are consecutive, so the jobs of a phase are those above the last one before it,
    whatever job group they run in."""

    def __init__(self, tracker) -> None:
        self.tracker = tracker
        self.last = self._probe(max([-1, *tracker.getActiveJobsIds(), *tracker.getJobIdsForGroup(None)]))
        self.first = self.last + 1

    def __call__(self) -> tuple[int, int]:
        self.last = self._probe(max([self.last, *self.tracker.getActiveJobsIds()]))
        done = total = 0
        for job in range(self.first, self.last + 1):
            info = self.tracker.getJobInfo(job)
            if info is None:
                continue
            for stage_id in info.stageIds:
                stage = self.tracker.getStageInfo(stage_id)
                # a finished job's stage that ran no task was skipped: its shuffle output existed
                if stage is None or (info.status != "RUNNING" and stage.numCompletedTasks == 0):
                    continue
                done += min(stage.numCompletedTasks, stage.numTasks)
                total += stage.numTasks
        return done, total

    def close(self) -> None:
        pass

    def _probe(self, job: int) -> int:
        """The last job id known to the tracker from `job` on: ids are given in order, so the jobs after
        `job` follow it one by one (whatever job group they run in, which getJobIdsForGroup(None) omits)."""
        while self.tracker.getJobInfo(job + 1) is not None:
            job += 1
        return job


class ConnectTasks:
    """The tasks of the operations a Spark Connect session runs while this feed is registered as its
    progress handler: the latest stage counts of each operation, summed."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.operations: dict[str | None, tuple[int, int]] = {}
        self.lock = threading.Lock()
        spark.registerProgressHandler(self.handle)

    def handle(self, stages: Iterable[Any] | None, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        counts = [(min(s.num_completed_tasks, s.num_tasks), s.num_tasks) for s in stages or ()]
        with self.lock:
            self.operations[operation_id] = (sum(d for d, _ in counts), sum(t for _, t in counts))

    def __call__(self) -> tuple[int, int]:
        with self.lock:
            counts = list(self.operations.values())
        return sum(d for d, _ in counts), sum(t for _, t in counts)

    def close(self) -> None:
        self.spark.removeProgressHandler(self.handle)
