"""Every user-visible output is byte-identical to what the code before issue 36's plan/run refactor
(commit 024968a) gave: one command-line session (tests/user_outputs.py: generate, txn-report, plan,
compact, retain, validate, dump, export, each with a fixed --now) digested and compared with the digests
recorded from that commit (tests/fixtures/user_outputs.json). Normalised: the session's temporary
directory in stdout (`<TMP>`); not compared: stderr (progress and timings) and the files' times."""

from __future__ import annotations

import json

import pytest

from .conftest import REPO
from .user_outputs import run_session

RECORDED = REPO / "tests" / "fixtures" / "user_outputs.json"


@pytest.mark.spark
def test_a_sessions_outputs_are_those_recorded_before_the_plan_run_refactor(spark, tmp_path):
    recorded = json.loads(RECORDED.read_text())
    now = run_session(str(tmp_path.resolve()))
    assert sorted(now) == sorted(recorded)
    for step, digests in recorded.items():
        if isinstance(digests, dict) and step.startswith("files after"):
            changed = sorted(f for f in digests.keys() | now[step].keys() if digests.get(f) != now[step].get(f))
            assert not changed, f"{step}: these files differ from the recorded ones: {changed}"
        else:
            assert now[step] == digests, f"{step}: not what the code of commit 024968a printed"
