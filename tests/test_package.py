"""kafkalog as a user installs it: the front door (`import kafkalog`), the extras, the jobs and conf
templates in the package, and the built wheel in a fresh virtual environment running a job with
spark-submit from outside the repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pyspark
import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
NOW = 1_700_100_000_000


def python(*args: str, cwd: Path | None = None, executable: str = sys.executable) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)} if executable == sys.executable else _outside_env()
    return subprocess.run(
        [executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _outside_env() -> dict[str, str]:
    """The environment of a user outside the repository: no PYTHONPATH, no conf dir."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KAFKALOG_CONF_DIR", "VIRTUAL_ENV")}


# -- the front door ---------------------------------------------------------------------------------------


def test_import_kafkalog_gives_the_front_door_without_importing_pyspark():
    run = python(
        "-c",
        """
import json, sys
import kafkalog
light = "pyspark" not in sys.modules
found = {name: getattr(kafkalog, name) for name in kafkalog.__all__}
names = {name: f"{value.__module__}.{value.__qualname__}" for name, value in found.items()}
print(json.dumps({"light": light, "names": names, "still_light": "pyspark" not in sys.modules}))
""",
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["light"] and out["still_light"]  # resolving every name imports no pyspark either
    assert out["names"] == {
        "compact": "kafkalog.api.compact",
        "plan": "kafkalog.api.plan",
        "retain": "kafkalog.api.retain",
        "purge": "kafkalog.api.purge",
        "validate": "kafkalog.api.validate",
        "export": "kafkalog.api.export",
        "txn_report": "kafkalog.api.txn_report",
        "verify_purge": "kafkalog.api.verify_purge",
        "topic_table": "kafkalog.operations.export.topic_table",
        "read": "kafkalog.spark.read_log",
        "register": "kafkalog.spark.register",
        "session": "kafkalog.spark.session.local_session",
        "local_session": "kafkalog.spark.session.local_session",
        "resolver_from": "kafkalog.config.resolver.resolver_from",
        "LogDir": "kafkalog.storage.logdir.LogDir",
        "KafkaLogError": "kafkalog.errors.KafkaLogError",
    }


def test_an_unknown_name_of_the_package_is_an_attribute_error():
    import kafkalog

    with pytest.raises(AttributeError, match="has no attribute 'compactt'"):
        kafkalog.compactt  # noqa: B018


# -- the extras ---------------------------------------------------------------------------------------


def requirements(extra: str) -> list[Requirement]:
    """What `pip install kafkalog[extra]` brings besides the core, the extras it names included."""
    found = []
    for text in PYPROJECT["project"]["optional-dependencies"][extra]:
        requirement = Requirement(text)
        if requirement.name == "kafkalog":
            for inner in sorted(requirement.extras):
                found += requirements(inner)
        else:
            found.append(requirement)
    return found


def test_a_spark_job_pulls_no_notebook_packages():
    spark = {r.name for r in requirements("spark")}
    assert {"pyspark", "pandas", "deltalake"} <= spark
    assert not spark & {"matplotlib", "ipywidgets", "ipython", "ipykernel", "jupyter"}
    assert {"matplotlib", "ipywidgets"} <= {r.name for r in requirements("notebooks")}
    assert {r.name for r in requirements("delta")} == {"deltalake"}


def test_each_optional_package_is_brought_by_the_extra_its_error_names():
    """kafkalog/extras.py's table, against pyproject.toml: `pip install 'kafkalog[EXTRA]'` installs the
    distribution of each module (a requirement's own extras included, as pyspark[connect]'s grpcio)."""
    from importlib.metadata import packages_distributions, requires

    from packaging.utils import canonicalize_name

    from kafkalog.extras import EXTRAS

    distributions = packages_distributions()
    for module, extra in EXTRAS.items():
        brought = set()
        for requirement in requirements(extra):
            brought.add(canonicalize_name(requirement.name))
            for inner in requirement.extras:
                for text in requires(requirement.name) or ():
                    dependency = Requirement(text)
                    if dependency.marker is not None and dependency.marker.evaluate({"extra": inner}):
                        brought.add(canonicalize_name(dependency.name))
        provides = {canonicalize_name(d) for d in distributions.get(module.split(".")[0], ())}
        assert provides & brought, (module, extra, provides, brought)


def test_the_declared_pyspark_range_is_the_one_the_tests_run():
    ranges = {str(r.specifier) for extra in ("spark", "connect") for r in requirements(extra) if r.name == "pyspark"}
    assert len(ranges) == 1, ranges  # one range for every extra
    declared = Requirement("pyspark" + ranges.pop()).specifier
    tested = Version(pyspark.__version__)
    assert tested in declared
    # the set-up installs the newest release the package allows: nothing newer is declared than tested
    assert Version(f"{tested.major}.{tested.minor + 1}.0") not in declared


# -- the jobs and the conf templates in the package -----------------------------------------------------


def test_python_m_kafkalog_jobs_names_the_job_files_and_the_conf_templates(tmp_path):
    path = python("-m", "kafkalog.jobs", "--path", "compact", cwd=tmp_path)
    assert path.returncode == 0, path.stderr
    job = Path(path.stdout.strip())
    assert job == REPO / "kafkalog" / "jobs" / "compact.py" and job.is_file()
    assert (REPO / "jobs" / "compact.py").resolve() == job  # the repository's jobs/ are that file, not a copy
    conf = python("-m", "kafkalog.jobs", "--conf-dir", cwd=tmp_path)
    assert Path(conf.stdout.strip()) == REPO / "kafkalog" / "conf" == (REPO / "conf").resolve()
    wrong = python("-m", "kafkalog.jobs", "--path", "compactt", cwd=tmp_path)
    assert wrong.returncode == 2 and "--path {compact,retain,validate,purge,export,repartition}" in wrong.stderr


# -- the wheel, installed outside the repository ------------------------------------------------------------


@pytest.mark.spark
def test_the_wheel_in_a_fresh_venv_runs_a_job_with_spark_submit(tmp_path):
    """Builds the wheel as a user's `pip install` would (pip wheel, setuptools in build isolation),
    installs it alone (--no-deps) into a new venv, and runs from a directory outside the repository.
    The dependencies (pyspark, pyarrow, ...) come from this environment's site-packages through a .pth
    file rather than from the index, to stay quick; this environment holds kafkalog only as an editable
    finder, which a .pth line does not load: the kafkalog the venv imports is the wheel's (checked)."""
    source = tmp_path / "source"  # a clean copy: setuptools builds in the tree and keeps its build/ there
    shutil.copytree(REPO / "kafkalog", source / "kafkalog", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("kafkalog-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    info = f"kafkalog-{wheel.name.split('-')[1]}.dist-info"
    assert {
        f"{info}/licenses/LICENSE",
        "kafkalog/jobs/compact.py",
        "kafkalog/jobs/__main__.py",
        "kafkalog/conf/kafkalog.properties",
        "kafkalog/conf/spark-defaults.conf",
        "kafkalog/conf/log4j2.properties",
        "kafkalog/conf/topics/customers.properties",
    } <= names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-File: LICENSE" in metadata and "Provides-Extra: notebooks" in metadata

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    venv_python = str(env_dir / "bin" / "python")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", venv_python, "install", "-q", "--no-deps", str(wheel)],
        env=_outside_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    site = python("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", executable=venv_python)
    Path(site.stdout.strip(), "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "work"  # the user's directory: no repository anywhere near
    work.mkdir()
    where = python("-c", "import kafkalog; print(kafkalog.__file__)", cwd=work, executable=venv_python)
    assert where.stdout.strip().startswith(str(env_dir)), where
    conf = python("-m", "kafkalog.jobs", "--conf-dir", cwd=work, executable=venv_python).stdout.strip()
    job = python("-m", "kafkalog.jobs", "--path", "compact", cwd=work, executable=venv_python).stdout.strip()
    assert conf.startswith(str(env_dir)) and job.startswith(str(env_dir)) and Path(job).is_file()

    generate = subprocess.run(  # the console script the wheel installs
        [str(env_dir / "bin" / "kafkalog"), "generate", "log", "--preset", "small", "--seed", "7", "--records", "100",
         "--config-out", "kafkalog.properties"],
        cwd=work, env=_outside_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert generate.returncode == 0, generate.stderr
    submit = subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[2]", "--properties-file", f"{conf}/spark-defaults.conf",
         "--driver-java-options", f"-Dlog4j2.configurationFile=file:{conf}/log4j2.properties",
         job, "log", "--now", str(NOW), "--config-file", "kafkalog.properties"],
        cwd=work,
        env={**_outside_env(), "PYSPARK_PYTHON": venv_python, "PYSPARK_DRIVER_PYTHON": venv_python},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert submit.returncode == 0, submit.stdout
    assert "\n1 of 4 compacted partitions chosen at now=" in submit.stdout
    assert "kafkalog compact: exit code 0 (done) after" in submit.stdout
    assert "INFO SparkContext" not in submit.stdout  # the packaged log4j2.properties reached the driver
    checkpoint = (work / "log" / "cleaner-offset-checkpoint").read_text().split("\n")
    assert checkpoint[1] == "1" and checkpoint[2].startswith("customers 0 ")  # one partition cleaned
