"""Prices (docs/llm-requests.md#prices): parsing of model listings, the arithmetic of a Price
(cached input, long-context tiers, batch prices), a configured price."""

import math

import pytest

from overbrainer.config.model import PriceSetting
from overbrainer.llm.prices import Price, Tier, configured, entries, price_in
from overbrainer.support.usage import Usage


def test_openrouter_string_prices():
    listing = [{"id": "a/b", "pricing": {"prompt": "0.000001", "completion": "0.000004"}}]
    p = price_in(listing, "a/b")
    assert math.isclose(p.input_per_million, 1.0) and math.isclose(p.output_per_million, 4.0)


def test_nanogpt_numeric_prices_need_the_unit():
    ok = [{"id": "m", "pricing": {"prompt": 0.5, "completion": 2, "unit": "per_million_tokens"}}]
    assert price_in(ok, "m") == Price(0.5, 2.0)
    assert price_in([{"id": "m", "pricing": {"prompt": 0.5, "completion": 2}}], "m") is None


@pytest.mark.parametrize(
    "pricing",
    [{"prompt": "-1", "completion": "0"}, {"prompt": "nan", "completion": "0"},
     {"prompt": "inf", "completion": "0"},
     {"prompt": "0.1"}, {"prompt": ["x"], "completion": "0"}, {"prompt": "abc", "completion": "0"},
     {"prompt": True, "completion": 1, "unit": "per_million_tokens"}, "free"],
)
def test_unknown_prices(pricing):
    assert price_in([{"id": "m", "pricing": pricing}], "m") is None


def test_exact_id_and_shapes():
    listing = [{"id": "m-large", "pricing": {"prompt": "1", "completion": "1"}}]
    assert price_in(listing, "m") is None
    assert entries({"data": listing}) is listing and entries(listing) is listing
    assert entries({"models": []}) is None


def test_cost():
    assert Price(2.0, 10.0).cost(Usage(1_000_000, 500_000)) == pytest.approx(7.0)


def test_cached_input_tokens_cost_the_cached_price():
    p = Price(2.0, 10.0, cached_per_million=0.5)
    assert p.cost(Usage(1_000_000, 0), cached_tokens=400_000) == pytest.approx(600_000 * 2e-6 + 400_000 * 0.5e-6)
    assert Price(2.0, 10.0).cost(Usage(1_000_000, 0), cached_tokens=400_000) == pytest.approx(2.0)
    assert p.cost(Usage(10, 0), cached_tokens=50) == pytest.approx(10 * 0.5e-6)  # never more than the input
    assert p.bound(1_000_000, 0) == pytest.approx(2.0)  # the bound counts no token as cached


def test_a_long_context_tier_prices_the_whole_request_past_its_start():
    p = Price(1.0, 2.0, tiers=(Tier(200_000, 2.0, 3.0),))
    assert p.cost(Usage(200_000, 1_000_000)) == pytest.approx(0.2 + 2.0)
    assert p.cost(Usage(200_001, 1_000_000)) == pytest.approx(200_001 * 2e-6 + 3.0)
    assert p.bound(300_000, 1000) == pytest.approx(300_000 * 2e-6 + 1000 * 3e-6)
    # Requests counted together are tiered by their mean size.
    assert p.cost(Usage(1_000_000, 0), requests=10) == pytest.approx(1.0)
    assert p.bound(1_000_000, 0, requests=2) == pytest.approx(2.0)


def test_the_batch_price_is_the_one_given_else_half():
    p = Price(2.0, 8.0, request=0.01, cached_per_million=1.0, tiers=(Tier(10, 4.0, 16.0, 2.0),))
    half = p.batched()
    assert (half.input_per_million, half.output_per_million, half.cached_per_million) == (1.0, 4.0, 0.5)
    assert half.tiers == (Tier(10, 2.0, 8.0, 1.0),) and half.cost(Usage(5, 5)) == pytest.approx(p.cost(Usage(5, 5)) / 2)
    given = Price(2.0, 8.0, batch=Price(1.5, 6.0))
    assert given.batched() == Price(1.5, 6.0)


def test_a_configured_price():
    free = configured(PriceSetting(0.0, 0.0), "providers.llm.price")
    assert free.free and free.text() == "free" and free.source == "providers.llm.price"
    assert free.bound(10**9, 10**9) == 0 and free.batched().bound(10**9, 10**9) == 0
    p = configured(PriceSetting(2.5, 10.0, cached_input=0.25, batch_input=1.0, batch_output=5.0), "roles.parent.price")
    assert p.batched() == Price(1.0, 5.0, cached_per_million=0.25, source="roles.parent.price")
    assert p.text() == ("$2.50 in, $10.00 out per million tokens (cached input $0.25; batch $1.00 in, $5.00 out)")
    half = configured(PriceSetting(2.5, 10.0), "roles.parent.price")
    assert half.text() == "$2.50 in, $10.00 out per million tokens (batch $1.25 in, $5.00 out)"
    assert configured(PriceSetting(0.075, 0.3), "x").text().startswith("$0.075 in, $0.30 out")


def test_openrouter_lists_a_cached_input_price():
    listing = [{"id": "m", "pricing": {"prompt": "0.000002", "completion": "0.000008", "input_cache_read": "0.0000005"}}]
    assert price_in(listing, "m").cached_per_million == pytest.approx(0.5)
