"""OVERBRAINER_TIME_SCALE multiplies the Runpod target's timing constants (a testing aid)."""

import pytest

from overbrainer.errors import ConfigError
from overbrainer.support.timescale import scaled


def test_the_time_scale_multiplies_the_tools_waits(monkeypatch):
    monkeypatch.delenv("OVERBRAINER_TIME_SCALE", raising=False)
    assert scaled(10) == 10
    monkeypatch.setenv("OVERBRAINER_TIME_SCALE", "0.01")
    assert scaled(10) == pytest.approx(0.1)
    for bad in ("fast", "0", "-1", "nan", "inf"):
        monkeypatch.setenv("OVERBRAINER_TIME_SCALE", bad)
        with pytest.raises(ConfigError, match="^OVERBRAINER_TIME_SCALE must be a number greater than 0"):
            scaled(1)
