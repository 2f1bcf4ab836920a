"""Statistics of a compare, checked against values computed by hand."""

from __future__ import annotations

import pytest

from overbrainer.compare import stats


def test_wilson_interval_by_hand():
    # 8 of 10: p = 0.8, z² = 3.841459; centre = 0.9920730 / 1.3841459 = 0.7167402,
    # half = 1.959964 · sqrt(0.016 + 0.0096037) / 1.3841459 = 1.959964 · 0.1600114 / 1.3841459
    #      = 0.3136166 / 1.3841459 = 0.2265777 → [0.4901625, 0.9433179]
    low, high = stats.wilson(8, 10)
    assert low == pytest.approx(0.4901625, abs=2e-6) and high == pytest.approx(0.9433179, abs=2e-6)
    # 0 of 5: centre = half = (3.841459/10) / (1 + 3.841459/5) = 0.384146 / 1.768292 = 0.217241
    low, high = stats.wilson(0, 5)
    assert low == 0.0 and high == pytest.approx(0.434482, abs=1e-6)
    # 5 of 5 mirrors it.
    low, high = stats.wilson(5, 5)
    assert low == pytest.approx(1 - 0.434482, abs=1e-6) and high == 1.0
    # 50 of 100: centre 0.5, half = 1.959964 · sqrt(0.0025 + 0.0000960365) / 1.0384146
    #   = 1.959964 · 0.0509513 / 1.0384146 = 0.0998628 / 1.0384146 = 0.0961686
    low, high = stats.wilson(50, 100)
    assert low == pytest.approx(0.4038314, abs=2e-6) and high == pytest.approx(0.5961686, abs=2e-6)
    assert stats.wilson(0, 0) is None


def test_nearest_rank():
    values = [float(v) for v in range(10, 0, -1)]
    assert stats.nearest_rank(values, 50) == 5.0   # rank ceil(5) = 5
    assert stats.nearest_rank(values, 95) == 10.0  # rank ceil(9.5) = 10
    assert stats.nearest_rank([3.0], 50) == 3.0    # rank at least 1
    assert stats.nearest_rank([], 50) is None


def test_summary_counts_errors_as_losses_and_leaves_unparsed_out():
    verdicts = ["win", "win", "tie", "loss", "error", "unparsed"]
    answers = [{"id": "a", "answer": "x", "finish": "length", "seconds": 2.0, "first_token_seconds": 0.5,
                "tokens_per_second": 10.0},
               {"id": "b", "answer": "x", "finish": "stop", "seconds": 4.0, "first_token_seconds": 1.5,
                "tokens_per_second": 30.0},
               {"id": "c", "answer": "x", "finish": "stop", "seconds": float("nan"), "first_token_seconds": None,
                "tokens_per_second": None},
               {"id": "d", "error": "boom"}]
    s = stats.summarize(verdicts, answers)
    assert (s["questions"], s["wins"], s["ties"], s["losses"], s["errors"], s["unparsed"]) == (6, 2, 1, 1, 1, 1)
    assert s["win_or_tie"] == 3 / 5  # (2 + 1) / (6 − 1)
    assert s["truncated"] == 1
    assert (s["latency_p50"], s["latency_p95"], s["mean_seconds"]) == (2.0, 4.0, 3.0)  # nan left out
    assert s["first_token_p50"] == 0.5 and s["tokens_per_second"] == 20.0
    assert s["both_orders"] is False and "flip_rate" not in s
    assert stats.summarize(["unparsed"], [])["win_or_tie"] is None
    s = stats.summarize(["win", "tie"], [], flips=1, pairs=2)
    assert (s["flips"], s["order_pairs"], s["flip_rate"]) == (1, 2, 0.5)


def test_costs_per_thousand_requests():
    # parent: mean in (800 + 1200)/2 = 1000, mean out (400 + 600)/2 = 500 at $3 / $15 per 1M:
    #   (1000·3 + 500·15) / 1e6 × 1000 = 10.5; child: $0.5/h × 1.8 s / 3600 × 1000 = 0.25
    c = stats.costs([(800, 400), (1200, 600), (None, None)], 1.8, price_in=3.0, price_out=15.0,
                    child_per_hour=0.5)
    assert c == {"parent_per_1k": 10.5, "child_per_1k": 0.25, "ratio": pytest.approx(0.25 / 10.5)}
    c = stats.costs([(800, 400)], 1.8, price_in=3.0, price_out=None, child_per_hour=None)
    assert c == {"parent_per_1k": None, "child_per_1k": None, "ratio": None}


def test_gate_on_the_lower_bound():
    s = stats.summarize(["win"] * 8 + ["loss"] * 2, [])  # interval [0.490, 0.943]
    assert stats.gate(s, 0.49) is None
    message = stats.gate(s, 0.5)
    assert "lower bound is under --min-win-or-tie 0.5" in message and "49.0%" in message
    assert "cannot reach" in stats.gate(stats.summarize(["unparsed"], []), 0.1)
