"""Progress of the long commands, phase by phase (plan, scan and decide, rewrite, swap, ...): a bar
per phase on a terminal or in a notebook (tqdm), otherwise a log line (logger `kafkalog.progress`)
when a phase starts and ends and at most one every few seconds in between; nothing when quiet.

Totals come from what a command has planned (partitions, segments, bytes); what is done from the
driver's own counts (`Phase.advance`) or, in a Spark phase, from a feed of tasks done of total
(kafkalog/spark/progress.py), polled in a background thread.

    from kafkalog.operations import progress
    progress.set_mode("off")   # "auto" (the default): a bar on a terminal or in a notebook, log lines elsewhere
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

MODES = ("auto", "bar", "log", "off")
LOG_INTERVAL_S = 5.0  # at most one log line per phase this often, between its start and end lines
POLL_INTERVAL_S = 0.5  # how often a Spark phase's task counts are read

log = logging.getLogger("kafkalog.progress")
T = TypeVar("T")


class Feed(Protocol):
    """Tasks done and in total so far (kafkalog/spark/progress.py); closed when the phase ends."""

    def __call__(self) -> tuple[int, int]: ...

    def close(self) -> None: ...


@dataclass
class Progress:
    """Where phases report: `mode` one of MODES; `interval` the seconds between log lines; `poll`
    the seconds between readings of a Spark phase's feed; `clock` the time in seconds (a test's own)."""

    mode: str = "auto"
    interval: float = LOG_INTERVAL_S
    poll: float = POLL_INTERVAL_S
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"progress mode must be one of {', '.join(MODES)}, not {self.mode!r}")

    def phase(
        self,
        command: str,
        name: str,
        *,
        total: int | None = None,
        unit: str = "segment",
        nbytes: int | None = None,
        feed: Feed | None = None,
    ) -> Phase:
        """A phase of `command` over `total` `unit`s of `nbytes` bytes; with `feed`, its done count
        is the feed's tasks."""
        mode = self.mode if self.mode != "auto" else "bar" if _interactive() else "log"
        return Phase(self, mode, f"{command} {name}", total, unit, nbytes, feed)


def _interactive() -> bool:
    """A terminal on stderr, or a notebook kernel (whose stderr is no terminal but shows a bar)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    terminal = getattr(sys.stderr, "isatty", lambda: False)()  # stderr may be None, or a stream without isatty
    return terminal or (shell is not None and "IPKernelApp" in shell.config)


_current = Progress()


def set_mode(mode: str) -> None:
    """How every later phase reports: "auto", "bar", "log" or "off" (the command line's --quiet)."""
    global _current
    _current = Progress(mode)


def current() -> Progress:
    return _current


def phase(command: str, name: str, **totals: Any) -> Phase:
    """A phase reported the current way (see `Progress.phase`)."""
    return _current.phase(command, name, **totals)


def watch(spark, name: str = "scan") -> Phase:
    """A phase over the Spark tasks of whatever runs inside the block: the scans (`read_records`,
    `format("kafkalog")`, ...) are lazy, so their work runs in the caller's own actions.

        with progress.watch(spark):
            read_records(spark, log_dir).groupBy("topic").count().show()
    """
    from ..spark.progress import task_feed

    return phase("spark", name, unit="task", feed=task_feed(spark))


def totals(items: Sequence[T], nbytes: Callable[[T], int]) -> dict:
    """What a phase over `items` covers, as `phase` takes it: their number and their bytes."""
    return {"total": len(items), "nbytes": sum(nbytes(i) for i in items)}


def track(items: Iterable[T], command: str, name: str, unit: str) -> Iterator[T]:
    """`items`, each counted done as the next is asked for: a phase over a driver-side loop."""
    items = list(items)
    with phase(command, name, total=len(items), unit=unit) as counted:
        for item in items:
            yield item
            counted.advance()


@dataclass
class Phase:
    """One phase's counts, shown as a bar or as log lines while it runs (a context manager)."""

    progress: Progress
    mode: str
    title: str
    total: int | None
    unit: str
    nbytes: int | None
    feed: Feed | None
    done: int = 0
    done_bytes: int = 0
    tasks: tuple[int, int] = (0, 0)  # from the feed: done, in total
    started: float = 0.0
    last_line: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _poller: threading.Thread | None = None
    _bar: Any = None
    _bar_context: ExitStack = field(default_factory=ExitStack)

    def __enter__(self) -> Phase:
        self.started = self.last_line = self.progress.clock()
        if self.mode == "log":
            log.info("%s: started%s", self.title, f": {self._totals()}" if self._totals() else "")
        elif self.mode == "bar":
            self._open_bar()
        if self.feed is not None and self.mode != "off":
            self._poller = threading.Thread(target=self._poll_until_stopped, name=self.title, daemon=True)
            self._poller.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
        try:
            if exc_type is None and self.mode != "off":
                self._finish()
        finally:
            if self.feed is not None:
                self.feed.close()
            self._bar_context.close()
        if self.mode == "log":
            elapsed = self.progress.clock() - self.started
            if exc_type is None:
                log.info("%s: done in %.1f s: %s%s", self.title, elapsed, self._counts(), self._rate(elapsed))
            else:
                log.info("%s: stopped after %.1f s by %s", self.title, elapsed, exc_type.__name__)

    def _finish(self) -> None:
        """The last counts: the feed's, or, on the driver, everything planned (the phase is done)."""
        if self.feed is not None:
            self._read_feed()
        else:
            self.done = max(self.done, self.total or 0)
            self.done_bytes = max(self.done_bytes, self.nbytes or 0)
        if self.mode == "bar":
            self._update_bar()

    def advance(self, n: int = 1, nbytes: int = 0) -> None:
        """`n` units of `nbytes` bytes done, counted on the driver."""
        with self._lock:
            self.done += n
            self.done_bytes += nbytes
            self._show()

    def poll(self) -> None:
        """Read the feed's task counts once and show them."""
        if self._read_feed():
            with self._lock:
                self._show()

    def _read_feed(self) -> bool:
        try:
            counts = self.feed() if self.feed is not None else None
        except Exception:  # the session is going away: progress is not worth failing a command for
            return False
        if counts is not None:
            self.tasks = counts
        return counts is not None

    def _poll_until_stopped(self) -> None:
        while not self._stop.wait(self.progress.poll):
            self.poll()

    # -- showing --------------------------------------------------------------------------------------

    def _open_bar(self) -> None:
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        if self.feed is not None:  # the bar counts tasks; the plan's totals stand beside it
            bar = tqdm(desc=self.title, unit=" tasks", postfix=self._totals() or None)
        elif self.nbytes is not None:  # the bar counts bytes, the units beside it
            bar = tqdm(desc=self.title, total=self.nbytes, unit="B", unit_scale=True)
        else:
            bar = tqdm(desc=self.title, total=self.total, unit=f" {self.unit}s")
        self._bar = bar
        self._bar_context.callback(bar.close)
        self._bar_context.enter_context(logging_redirect_tqdm())  # log lines above the bar, not through it

    def _show(self) -> None:
        if self.mode == "bar":
            self._update_bar()
        elif self.mode == "log":
            now = self.progress.clock()
            if now - self.last_line >= self.progress.interval:
                self.last_line = now
                log.info("%s: %s%s", self.title, self._counts(), self._eta(now - self.started))

    def _update_bar(self) -> None:
        bar = self._bar
        if self.feed is not None:
            bar.total = self.tasks[1]
            bar.update(self.tasks[0] - bar.n)
        elif self.nbytes is not None:
            bar.update(self.done_bytes - bar.n)
            bar.set_postfix_str(f"{self.done}/{self.total} {self.unit}s" if self.total is not None else "")
        else:
            bar.update(self.done - bar.n)

    def _totals(self) -> str:
        """What the phase was planned to cover: units and bytes."""
        parts = [f"{self.total} {self.unit}s"] if self.total is not None else []
        parts += [_size(self.nbytes)] if self.nbytes is not None else []
        return ", ".join(parts)

    def _counts(self) -> str:
        """What is done, of what: the feed's tasks (the plan's totals beside them), else the units and
        bytes counted on the driver."""
        if self.feed is not None:
            totals = self._totals()
            return f"{self.tasks[0]}/{self.tasks[1]} tasks" + (f" ({totals})" if totals else "")
        text = f"{self.done}/{self.total} {self.unit}s" if self.total is not None else f"{self.done} {self.unit}s"
        if self.nbytes is not None:
            text += f", {_size(self.done_bytes)}/{_size(self.nbytes)}"
        return text

    def _measure(self) -> tuple[float, float | None, str]:
        """Done, in total, and their unit, for rates: tasks, else bytes, else units."""
        if self.feed is not None:
            return self.tasks[0], self.tasks[1], "tasks"
        if self.nbytes is not None:
            return self.done_bytes, self.nbytes, "B"
        return self.done, self.total, f"{self.unit}s"

    def _rate(self, elapsed: float) -> str:
        done, _, unit = self._measure()
        if elapsed <= 0 or not done:
            return ""
        rate = done / elapsed
        return f", {_size(rate) if unit == 'B' else f'{rate:.1f} {unit}'}/s"

    def _eta(self, elapsed: float) -> str:
        done, total, _ = self._measure()
        text = self._rate(elapsed)
        if text and total:
            text += f", ETA {max(total - done, 0) * elapsed / done:.0f} s"
        return text


def _size(n: float) -> str:
    """Bytes as a person reads them, in the decimal units of the bar: 512 B, 45.3 MB."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
