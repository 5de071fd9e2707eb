"""The options of `format("kafkalog")` below Spark: names, values, and what they resolve to in a log dir."""

from __future__ import annotations

import pytest

from kafkalog.errors import ConfigError
from kafkalog.spark.source_options import checked


def test_option_names_are_case_insensitive_and_an_unknown_one_names_the_closest():
    assert checked({"STARTINGOFFSET": "5", "path": "/x"}) == {"startingoffset": "5", "path": "/x"}
    with pytest.raises(ConfigError, match=r"unknown option 'startingOfset'.*did you mean 'startingOffset'\?"):
        checked({"startingOfset": "5"})
    with pytest.raises(ConfigError, match=r"unknown option 'nonsense'"):
        checked({"nonsense": "1"})
    with pytest.raises(ConfigError, match="given twice"):
        checked({"topics": "a", "TOPICS": "b"})
