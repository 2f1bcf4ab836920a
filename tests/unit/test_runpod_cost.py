"""A pod's rate and spend, the price line before a create, the max_cost_usd cap armed on the pod."""

from __future__ import annotations

import pytest

from overbrainer.runpod.cost import CostCap, arm_cost_cap, cap_warning, least_cap, price_line, spend
from overbrainer.support.fmt import about_usd as format_spend
from overbrainer.support.fmt import usd as format_usd
from overbrainer.support.fmt import usd_per_hour as format_rate


def test_spend_is_rate_times_billed_time_rounded_to_a_hundredth_of_a_cent():
    assert spend(0.53, 1000, 1000 + 3600) == 0.53
    assert spend(0.44, 0, 7380) == 0.902  # 2 h 3 min
    assert spend(1 / 3, 0, 1) == 0.0001
    assert spend(0.5, 100, 50) == 0.0  # a clock that went backwards
    assert spend(0.0, 0, 3600) is None and spend(None, 0, 3600) is None and spend(0.5, None, 10) is None


def test_dollars_read_the_same_everywhere():
    assert (format_usd(0.64), format_usd(19.0), format_usd(0.001), format_usd(0)) == (
        "$0.64", "$19.00", "<$0.01", "$0.00")
    assert (format_rate(0.53), format_rate(0), format_rate(None)) == ("$0.53/h", "-", "-")
    assert (format_spend(1.06), format_spend(None)) == ("about $1.06", "cost unknown")


def test_the_price_line_before_a_create():
    assert price_line("NVIDIA A40", 2, 0.44, 24) == "NVIDIA A40 × 2 at $0.88/h, max $21.12 over max_hours = 24"
    assert price_line("NVIDIA A40", 2, 0.44, 24, max_cost_usd=10) == (
        "NVIDIA A40 × 2 at $0.88/h, max $10.00 (max_cost_usd) within max_hours = 24")
    assert price_line("NVIDIA A40", 2, 0.44, 24, max_cost_usd=50) == (
        "NVIDIA A40 × 2 at $0.88/h, max $21.12 over max_hours = 24")
    assert price_line("NVIDIA A40", 1, 0.44, None) == "NVIDIA A40 × 1 at $0.44/h, no time limit (--keep-pod)"
    assert price_line("Some GPU", 1, None, 2.5) == "Some GPU × 1, list price unknown"


def test_the_cost_cap_arms_a_snapshot_then_a_delete():
    # $1/h with a $2 cap: snapshot after 1.75 h (15 min before the delete), delete after 2 h.
    cap = arm_cost_cap(2.0, 1.0, created_unix=10_000)
    assert cap == CostCap(snapshot_at=10_000 + 6300, delete_at=10_000 + 7200)
    # the pod gets durations (its clock need not agree with ours), counted from when it sees them
    assert cap.files(now=16_000.5) == {".pod/snapshot_in": "299\n", ".pod/cost_cap_in": "1199\n"}
    assert cap.files(now=20_000) == {".pod/snapshot_in": "0\n", ".pod/cost_cap_in": "0\n"}
    # $1/h with a $20 cap: 95 % of 20 h comes before 15 min ahead of the delete.
    assert arm_cost_cap(20.0, 1.0, created_unix=0) == CostCap(snapshot_at=68_400, delete_at=72_000)
    # A cap shorter than 15 min snapshots at once.
    assert arm_cost_cap(0.1, 1.0, created_unix=50) == CostCap(snapshot_at=50, delete_at=410)


def test_no_cap_to_arm_without_max_cost_or_on_a_kept_pod_and_none_possible_without_a_rate():
    assert arm_cost_cap(None, 1.0, 0) is None
    assert arm_cost_cap(5.0, 1.0, 0, keep=True) is None
    with pytest.raises(ValueError, match="no hourly rate"):
        arm_cost_cap(5.0, 0.0, 0)


def test_a_cap_buying_less_than_half_an_hour_is_warned_with_the_least_useful_cap():
    assert cap_warning(0.2, 0.88) == ("max_cost_usd = 0.2 buys only 14 min of pod at $0.88/h: the pod is "
                                      "deleted then; at least $0.44 buys 30 min")
    assert cap_warning(0.44, 0.88) is None and cap_warning(None, 0.88) is None and cap_warning(0.1, None) is None
    assert least_cap(0.89) == 0.45

