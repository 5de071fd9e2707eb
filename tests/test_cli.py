"""The command line as users meet it: exit codes and output forms."""
from __future__ import annotations

import json
import subprocess
import sys

from kafkalog.cli import main

from .conftest import REAL_FIXTURES


def test_validate_exit_codes(capsys, tmp_path):
    assert main(["validate", str(REAL_FIXTURES / "broker-dirs" / "kafka-gzip-idempotent")]) == 0
    bad = next((REAL_FIXTURES / "captured" / "kafka-rust").glob("*invalid_crc*"))
    assert main(["validate", str(bad)]) == 1
    assert main(["validate", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_validate_json_names_file_position_offset(capsys):
    bad = next((REAL_FIXTURES / "captured" / "kafka-rust").glob("*invalid_crc*"))
    assert main(["validate", "--json", str(bad)]) == 1
    report = json.loads(capsys.readouterr().out)
    (problem,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert (problem["check"], problem["position"], problem["offset"]) == ("batch.crc", 12, 0)
    assert problem["file"].endswith(bad.name)


def test_bad_config_is_refused_with_kafkas_rule(capsys):
    code = main(["validate", "--config", "index.interval.bytes=-1", str(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0")])
    assert code == 2 and "Value must be at least 0" in capsys.readouterr().err


def test_python_dash_m_runs():
    out = subprocess.run([sys.executable, "-m", "kafkalog", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("kafkalog ")
