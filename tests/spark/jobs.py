"""How many Spark jobs a step starts, counted by job ids: they only grow, while the status tracker
keeps only the newest `spark.ui.retainedJobs` (1,000) jobs, so the length of its list stops growing
once a shared session has run that many."""

from __future__ import annotations


def newest_job(spark) -> int:
    """The id of the newest job outside any job group (-1: none yet)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)
