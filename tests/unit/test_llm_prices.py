"""Price parsing of model listings (docs/llm-requests.md#prices)."""

import math

import pytest

from overbrainer.llm.prices import Price, entries, price_in
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
