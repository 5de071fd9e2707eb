"""The clock of the commands whose rules read time (compact, plan, retain, purge, txn-report):
`--now`, or the wall clock, shown as a date beside the epoch milliseconds Kafka's rules use, so that
an operator can see at a glance that the run decided at the time meant."""

from __future__ import annotations

import datetime
import time


def now_ms(given: int | None = None) -> int:
    """`given` (epoch ms), or the wall clock's."""
    return int(time.time() * 1000) if given is None else int(given)


def stamp(ms: int) -> str:
    """`2026-11-27T21:45:32.123Z (1795812332123)`: ISO 8601 in UTC, then the epoch milliseconds."""
    try:
        date = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, ValueError, OSError):  # beyond the years a date can show
        return f"({ms})"
    return f"{date.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} ({ms})"
