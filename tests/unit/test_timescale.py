"""OVERBRAINER_TIME_SCALE multiplies every Runpod timing constant (a testing aid)."""

from overbrainer.support.timescale import scaled


def test_scaled_reads_the_variable_at_each_call(monkeypatch):
    monkeypatch.delenv("OVERBRAINER_TIME_SCALE", raising=False)
    assert scaled(10) == 10
    monkeypatch.setenv("OVERBRAINER_TIME_SCALE", "0.01")
    assert scaled(10) == 0.1
    for bad in ("", "fast", "0", "-1", "nan", "inf"):
        monkeypatch.setenv("OVERBRAINER_TIME_SCALE", bad)
        assert scaled(10) == 10, bad
