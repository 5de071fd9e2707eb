"""A real Spark standalone cluster for tests/cluster: one master and two workers (one core, 1 GiB each) on
127.0.0.1, started from the installed pyspark's `spark-class` once per test session, and the job archive
(`scripts/build-job-archive.sh`) built once per session.

Both start early, in background threads (`StartedEarly`): tests/conftest.py runs tests/cluster last,
builds the archive from the run's first test on, and starts the cluster at the first test of tests/spark;
the cluster's thread then runs the applications of applications.py on it, and stops it. So the other
tests run while the JVMs start, pip installs and the applications run; the `applications` fixture here
waits for them.

Nothing here is skipped: when something the cluster needs is missing (Java, `spark-class`, venv-pack), the
tests fail saying what. The cluster runs in its own process groups, with its logs, work and local
directories in a temp directory; it is stopped whatever happens (the finalizer kills the process groups,
and the kernel sends SIGKILL to master and workers if the test process dies first).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import IO

import pyspark
import pytest

from tests.early import InBackground
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
WORKERS = 2
WORKER_MEMORY = "1g"  # one executor of Spark's default 1 GiB per worker
START_TIMEOUT = 300  # seconds; the machine the suite runs on has 2 cores and is often busy
# What the driver's and the cluster's processes must not inherit from the test process (its venv, a
# SparkSession's gateway, a conf dir), so that nothing reaches the executors but what the job ships.
INHERITED_NOT = ("PYSPARK_", "SPARK_", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KAFKALOG_", "MASTER")


def clean_environment(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED_NOT)}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


def die_with_parent(command: list[str]) -> list[str]:
    """`command` run so that the kernel sends it SIGKILL when the thread of the test process that started
    it ends, however the process ends (PR_SET_PDEATHSIG, set by util-linux's setpriv before it execs the
    command). Not by a `preexec_fn`: Python code in a child forked from a thread other than the main one
    first clears the other threads' states, and the py4j finalizer that runs then shuts down the main
    thread's connection to the test session's JVM, which it shares with the parent (a test then failed
    with `Connection reset by peer`; `test_a_cluster_process_leaves_the_sessions_connection_alone`)."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *command]


@dataclass
class Cluster:
    root: Path
    master_port: int
    webui_port: int
    work_dirs: list[Path] = field(default_factory=list)
    processes: list[tuple[str, subprocess.Popen, Path]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=10) as response:
            return json.load(response)

    def start(self) -> None:
        (self.root / "driver").mkdir()  # the drivers' spark.local.dir (submit_environment)
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.webui_port),
        )
        self._wait("the master's web UI", lambda state: state.get("status") == "ALIVE")
        for i in range(1, WORKERS + 1):
            work, local = self.root / f"worker-{i}", self.root / f"local-{i}"
            work.mkdir()
            local.mkdir()
            self.work_dirs.append(work)
            self._spawn(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(free_port()),
                "--cores",
                "1",
                "--memory",
                WORKER_MEMORY,
                "--work-dir",
                str(work),
                self.master_url,
                SPARK_LOCAL_DIRS=str(local),
            )
        self._wait(f"{WORKERS} workers to register", lambda state: state.get("aliveworkers") == WORKERS)

    def _spawn(self, name: str, main_class: str, *args: str, **env: str) -> None:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                die_with_parent([str(SPARK_CLASS), main_class, *args]),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=clean_environment(**env),
                cwd=self.root,
                start_new_session=True,
            )
        self.processes.append((name, process, log))

    def _wait(self, what: str, ready) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            for name, process, log in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"the Spark {name} exited with {process.returncode} while waiting for "
                        f"{what}; {log}:\n{_tail(log)}"
                    )
            try:
                if ready(self.state()):
                    return
            except (OSError, ValueError):
                pass  # the web UI is not up yet
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no {what} after {START_TIMEOUT} s; "
                    + "; ".join(f"{log}:\n{_tail(log)}" for _, _, log in self.processes)
                )
            time.sleep(1)

    def stop(self) -> None:
        """SIGTERM to each process group (master, workers, and the executors and Python workers the
        workers started), then SIGKILL to what is left after 20 s."""
        for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            for _, process, _ in reversed(self.processes):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            for _, process, _ in self.processes:
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if all(_group_gone(p.pid) for _, p, _ in self.processes):
                return

    def application_dirs(self, app_id: str) -> list[Path]:
        """The executors' working directories of an application, one per executor, on every worker."""
        return sorted(d for work in self.work_dirs for d in (work / app_id).glob("*") if d.is_dir())

    def remove_environments(self, app_id: str | None = None, timeout: float = 60) -> None:
        """Once the executors of an application (default: every one) are gone, delete what they
        unpacked (530 MB each), keeping their logs."""
        executors = self.application_dirs(app_id) if app_id else list(self.root.glob("worker-*/app-*/*"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(processes_in(d) for d in executors):
            time.sleep(0.5)
        for executor in executors:
            shutil.rmtree(executor / "environment", ignore_errors=True)


def processes_in(root: Path) -> dict[int, tuple[int, int, str, str]]:
    """{pid: (parent pid, CPU ticks, working directory, command line)} of the processes whose working
    directory is under `root`: the executors and Python workers of this test's cluster, no one else's."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            if not cwd.startswith(str(root) + os.sep):
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        found[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), cwd, command)
    return found


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"({err})"


def start_cluster(cluster: Cluster) -> None:
    """Start `cluster`; RuntimeError saying what is missing or what failed."""
    missing = [str(p) for p in (SPARK_CLASS, SPARK_SUBMIT) if not os.access(p, os.X_OK)]
    if missing:
        raise RuntimeError(f"the installed pyspark has no {', '.join(missing)}: the standalone cluster cannot start")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        raise RuntimeError(
            "no java on PATH and no JAVA_HOME: Spark's standalone cluster needs Java 17+ (scripts/setup.sh installs it)"
        )
    try:
        cluster.start()
    except RuntimeError as err:
        raise RuntimeError(f"the Spark standalone cluster did not start: {err}") from None


def build_job_archive(work: Path) -> Path:
    """dist/kafkalog-env.tar.gz as scripts/build-job-archive.sh builds it (some 30 s: a wheel, a venv
    installed from pip's cache, venv-pack compressing 530 MB), from a copy of this work tree in `work`
    (its files known to git, with their changes), so that a test run leaves the checkout's dist/ and
    build/ alone and never races another run's build. The copy uses the checkout's .venv.
    RuntimeError when it cannot be built."""
    copy = work / "repo"
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise RuntimeError(
            f"cannot list the work tree's files with git ({err}): the job archive is built from them"
        ) from None
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    (copy / ".venv").symlink_to(REPO / ".venv")
    started = time.monotonic()
    build = subprocess.run(
        ["bash", str(copy / "scripts" / "build-job-archive.sh")],
        cwd=copy,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=1200,
        env=clean_environment(),
    )
    archive = copy / "dist" / "kafkalog-env.tar.gz"
    if build.returncode != 0 or not archive.is_file():
        raise RuntimeError(
            f"scripts/build-job-archive.sh failed (exit {build.returncode}), so the jobs cannot be "
            f"shipped to the cluster:\n{build.stdout}"
        )
    print(f"\nscripts/build-job-archive.sh: {time.monotonic() - started:.0f} s", file=sys.stderr)
    shutil.rmtree(copy / "build", ignore_errors=True)  # the unpacked environment the archive was packed from
    return archive


class StartedEarly:
    """The job archive, built in a thread of its own when this is made, and the standalone cluster and its
    applications (applications.py), started in another by `start()` (tests/early.py): the cluster starts,
    runs every application once the archive is there, and stops. `applications()` (which starts them, if
    nothing has) waits for what they did (and raises what went wrong). The thread lives until `close()`:
    the kernel kills the processes it started when it ends (PR_SET_PDEATHSIG, `die_with_parent`)."""

    def __init__(self, tmp_path_factory):
        self._cluster = Cluster(tmp_path_factory.mktemp("standalone"), free_port(), free_port())
        self._archive_dir = tmp_path_factory.mktemp("job-archive")
        self._work = tmp_path_factory.mktemp("applications")
        self._started: InBackground | None = None
        self._archive = InBackground(build_job_archive, self._archive_dir)

    def start(self) -> InBackground:
        if self._started is None:
            self._started = InBackground(self._run, hold=True)
        return self._started

    def _run(self) -> tuple[Cluster, SimpleNamespace]:
        from .applications import run_applications

        try:
            start_cluster(self._cluster)
            return self._cluster, run_applications(self._cluster, self._archive.result(), self._work)
        finally:  # idle, its three JVMs would cost some 9% of a core until the run's end (session 19)
            self._cluster.stop()

    def applications(self) -> tuple[Cluster, SimpleNamespace]:
        return self.start().result()

    def close(self) -> None:
        self._archive.release()
        if self._started is not None:
            self._started.finished()
            self._cluster.remove_environments(timeout=0)
            self._started.release()
        shutil.rmtree(self._archive_dir / "repo", ignore_errors=True)


@pytest.fixture(scope="session")
def applications(cluster_started_early) -> tuple[Cluster, SimpleNamespace]:
    """(the cluster, what its applications did), from tests/conftest.py's `cluster_started_early`."""
    try:
        return cluster_started_early.applications()
    except RuntimeError as err:
        pytest.fail(str(err), pytrace=False)


@dataclass
class Submitted:
    returncode: int
    stdout: str
    app_id: str | None

    def __str__(self) -> str:
        return f"spark-submit exited with {self.returncode}:\n{self.stdout}"


APP_ID = re.compile(r"application (app-\d+-\d+)")


def submit_command(cluster: Cluster, archive: Path, script: Path, *args: str, conf: dict | None = None) -> list[str]:
    """jobs/README.md's standalone command line, with 4 shuffle partitions, as in local mode and as
    jobs/README.md advises (Spark's default of 200 turns each of kafkalog's small shuffles into 200
    tasks, some 15 s more per job here), and the `conf` a test adds."""
    conf = {"spark.sql.shuffle.partitions": "4", **(conf or {})}
    return [
        str(SPARK_SUBMIT),
        "--master",
        cluster.master_url,
        "--archives",
        f"{archive}#environment",
        "--driver-java-options",
        "-Dlog4j2.configurationFile=conf/log4j2.properties",
        *[a for key, value in conf.items() for a in ("--conf", f"{key}={value}")],
        str(script),
        *args,
    ]


def submit_environment(cluster: Cluster, conf_dir: Path | None = None) -> dict:
    """jobs/README.md's standalone environment: the driver's Python is the local venv, the executors'
    the archive's. The driver unpacks the archive too (Spark does in client mode), in the cluster's
    temp directory rather than /tmp."""
    env = clean_environment(
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYSPARK_PYTHON="./environment/bin/python",
        SPARK_LOCAL_DIRS=str(cluster.root / "driver"),
    )
    if conf_dir is not None:
        env["KAFKALOG_CONF_DIR"] = str(conf_dir)
    return env


@dataclass
class Submission:
    """A running spark-submit. Its output (the driver's stderr too) goes to a temporary file, so that it
    never blocks on a full pipe while the test does something else."""

    process: subprocess.Popen
    output: IO[str]

    def running(self) -> bool:
        return self.process.poll() is None


def start_submit(
    cluster: Cluster, archive: Path, script: Path, *args: str, conf_dir: Path | None = None, conf: dict | None = None
) -> Submission:
    output = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    process = subprocess.Popen(
        die_with_parent(submit_command(cluster, archive, script, *args, conf=conf)),
        cwd=REPO,
        env=submit_environment(cluster, conf_dir),
        stdout=output,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    return Submission(process, output)


def run_submitted(cluster: Cluster, submission: Submission, timeout: float = 900) -> Submitted:
    """Wait for a spark-submit, then delete what its executors unpacked."""
    process, note = submission.process, ""
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        note = f"\n(killed after {timeout} s)"
    with submission.output as output:
        output.seek(0)
        out = output.read() + note
    match = APP_ID.search(out)
    if match:
        cluster.remove_environments(match.group(1))
    return Submitted(process.returncode, out, match.group(1) if match else None)
