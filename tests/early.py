"""Set-up a test run starts in a background thread at its first test (tests/conftest.py), when the run
holds the tests that need it: the run's one pytest process keeps one of the machine's two cores busy
with tests that start no JVM, and the other core starts JVMs meanwhile. The fixture that needs the
set-up waits for it (`InBackground.result`), and gets what the start raised, if it failed."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path


class InBackground:
    """`call(*args)` in a daemon thread of its own from now on. `result()` waits for it and returns what
    it returned, or raises what it raised. With `hold`, the thread lives on until `release()`: the
    kernel kills a child started with PR_SET_PDEATHSIG when the thread that started it ends
    (tests/cluster/conftest.py's `_die_with_parent`)."""

    def __init__(self, call, *args, hold: bool = False):
        self._outcome: object = None
        self._done = threading.Event()
        self._release = threading.Event()
        if not hold:
            self._release.set()
        self._thread = threading.Thread(target=self._run, args=(call, args), daemon=True)
        self._thread.start()

    def _run(self, call, args) -> None:
        try:
            self._outcome = call(*args)
        except Exception as err:  # raised again where a fixture waits for it
            self._outcome = err
        finally:
            self._done.set()
        self._release.wait()

    def result(self):
        self._done.wait()
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome

    def finished(self) -> object:
        """What the call returned or raised, once it has ended (nothing raised here)."""
        self._done.wait()
        return self._outcome

    def release(self) -> None:
        """Once the call has ended, let a held thread end too, and wait for it."""
        self._done.wait()
        self._release.set()
        self._thread.join()


def generate(log_dir: Path, *options: str) -> None:
    """`kafkalog generate LOG_DIR OPTIONS...` in a process of its own, for set-up that runs beside the
    test process's main thread (whose tests may run the command line in-process meanwhile); RuntimeError
    with what it printed when it fails."""
    command = [sys.executable, "-m", "kafkalog", "generate", str(log_dir), *options]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}: {done.stderr}")
