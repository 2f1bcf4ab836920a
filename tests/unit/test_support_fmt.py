"""The one duration, byte and moment format (overbrainer/support/fmt.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from overbrainer.support import fmt


@pytest.mark.parametrize("seconds, compact, words", [
    (0, "0s", "0 s"),
    (0.05, "0.05s", "0.05 s"),      # a retry wait: "retrying in 0.05s"
    (0.5, "0.5s", "0.5 s"),         # a scaled grace: "no snapshot 0.5 s after …"
    (1.3, "1.3s", "1.3 s"),
    (2.0, "2s", "2 s"),
    (9.96, "10s", "10 s"),
    (45, "45s", "45 s"),
    (59.6, "1m", "1 min"),
    (725, "12m05s", "12 min 05 s"),
    (1800, "30m", "30 min"),        # `train stop`'s grace, as the cancel message words it
    (3720, "1h02m", "1 h 02 min"),  # the model card's training time
    (7200, "2h", "2 h"),
    (11220, "3h07m", "3 h 07 min"),
    (11279, "3h07m", "3 h 07 min"),  # cut, not rounded
    (-3, "0s", "0 s"),
])
def test_duration(seconds, compact, words):
    assert fmt.duration(seconds) == compact
    assert fmt.duration(seconds, words=True) == words


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (100_000, "100.0 kB"), (1_500_000, "1.5 MB"),
    (639_400_000, "639.4 MB"), (4_100_000_000, "4.1 GB"), (2_000_000_000_000, "2.0 TB"),
])
def test_size_is_in_decimal_units(n, text):
    assert fmt.size(n) == text


def test_stamp_is_rfc3339_utc_with_z():
    moment = dt.datetime(2026, 9, 22, 14, 30, 5, 999_000, tzinfo=dt.timezone.utc)
    assert fmt.stamp(moment) == "2026-09-22T14:30:05Z"
    assert fmt.stamp(moment.astimezone(dt.timezone(dt.timedelta(hours=5)))) == "2026-09-22T14:30:05Z"
    assert fmt.stamp(moment.timestamp()) == "2026-09-22T14:30:05Z"
    assert fmt.stamp(0) == "1970-01-01T00:00:00Z"
    now = fmt.stamp()
    assert len(now) == 20 and now.endswith("Z") and now[:4] >= "2026"
