"""The token bucket of the pacing (support/bucket.py), on a fake clock."""

from __future__ import annotations

import math

import pytest

from overbrainer.support.bucket import Bucket


def test_refills_at_its_rate_up_to_its_capacity():
    b = Bucket(rate=10, capacity=5, now=0.0)
    assert b.level == 5 and b.wait(5, 0.0) == 0
    b.take(5, 0.0)
    assert b.wait(1, 0.0) == pytest.approx(0.1)
    assert b.wait(3, 0.2) == pytest.approx(0.1)  # 2 refilled of the 3
    assert b.wait(1, 100.0) == 0 and b.level == 5  # never past the capacity


def test_a_cost_larger_than_the_bucket_waits_for_a_full_one_and_leaves_a_debt():
    b = Bucket(rate=10, capacity=5, now=0.0, level=0)
    assert b.wait(50, 0.0) == pytest.approx(0.5)  # full, not 50 units
    b.take(50, 0.5)
    assert b.level == pytest.approx(-45)
    assert b.wait(1, 0.5) == pytest.approx(4.6)  # the debt is paid back first: the long-run rate holds


def test_give_corrects_an_estimate_both_ways_within_the_capacity():
    b = Bucket(rate=1, capacity=100, now=0.0)
    b.take(80, 0.0)
    b.give(30, 0.0)  # the request used 50, not 80
    assert b.level == pytest.approx(50)
    b.give(-20, 0.0)  # it used 20 more than estimated
    assert b.level == pytest.approx(30)
    b.give(1000, 0.0)
    assert b.level == 100


def test_lower_follows_the_server_only_past_the_slack():
    b = Bucket(rate=1, capacity=100, now=0.0)
    assert not b.lower(99.5, 0.0, slack=1)
    assert b.lower(40, 0.0, slack=1) and b.level == 40
    assert not b.lower(90, 0.0)  # never raised


def test_rescale_keeps_the_level_within_the_new_capacity():
    b = Bucket(rate=1, capacity=100, now=0.0)
    b.rescale(2, 50, 0.0)
    assert (b.rate, b.capacity, b.level) == (2, 50, 50)
    b.take(50, 0.0)
    b.rescale(4, 200, 0.0)
    assert b.level == 0 and b.wait(8, 0.0) == pytest.approx(2)


def test_no_rate_waits_forever():
    b = Bucket(rate=0, capacity=1, now=0.0, level=0)
    assert b.wait(1, 0.0) == math.inf and not b.room(1, 0.0)
