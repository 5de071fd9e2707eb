"""Shared test set-up: where the real broker fixtures live, and one local SparkSession per run."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL_FIXTURES = (REPO.parent / "shared" / "fixtures" / "real").resolve()

if not REAL_FIXTURES.is_dir():
    raise RuntimeError(f"the real broker fixtures are expected at {REAL_FIXTURES} (shared/ beside the repo)")


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    return REAL_FIXTURES
