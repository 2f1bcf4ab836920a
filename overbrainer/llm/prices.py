"""Model prices (docs/llm-requests.md#prices): `Price`, and where a role's comes from, first that
gives one: the configuration (`price` on the role, else on its provider: `configured`), the
provider's model listing, the genai-prices database (llm/price_db.py).

One `PriceBook` per command, shared by every role: each provider's listing is fetched at most once,
when the first role on it connects, within 10 s, on a thread of its own (`lookup`) so that no
request waits for it; only a provider whose listing can carry prices (llm/dialects.lists_prices) is
asked. Unknown prices never fail anything by themselves (a spend cap refuses them: pipeline/).
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable

from overbrainer.llm.errors import LlmError
from overbrainer.support.failure import FailureKind
from overbrainer.support.threads import in_daemon

log = logging.getLogger(__name__)

LISTING_PATH = "/models?detailed=true"
LISTING_TIMEOUT = 10.0
LISTING = "the provider's listing"  # a Price's `source` when its listing gave it
# The published batch rate of both batch APIs (OpenAI's Batch API, Anthropic's Message Batches): a
# share of the online price, used when neither the database nor the configuration gives one.
BATCH_SHARE = 0.5
_MISSING = object()


@dataclass(frozen=True)
class Tier:
    """Rates that apply to a whole request once its input passes `start` tokens (a long-context
    price, as genai-prices gives it): USD per million tokens."""

    start: int
    input: float
    output: float
    cached: float | None = None


@dataclass(frozen=True)
class Price:
    """USD per million tokens; `request`: USD per request (OpenRouter's `pricing.request`);
    `reasoning_per_million`: the price of reasoning tokens when the listing gives one apart
    (`pricing.internal_reasoning`), else they cost what output tokens cost;
    `cached_per_million`: an input token the provider served from its prompt cache (None: the
    input price); `batch`: the price of a request sent through a batch API when the source gives
    one (else `BATCH_SHARE` of this one); `tiers`: dearer rates past an input size; `source`: where
    the price comes from (`LISTING`, `genai-prices 0.2.3`, `roles.parent.price`)."""

    input_per_million: float
    output_per_million: float
    request: float = 0.0
    reasoning_per_million: float | None = None
    cached_per_million: float | None = None
    batch: "Price | None" = None
    tiers: tuple[Tier, ...] = ()
    source: str = LISTING

    def _rates(self, input_tokens: int) -> tuple[float, float, float]:
        """(input, output, cached input) per million tokens for a request of `input_tokens`."""
        rates = (self.input_per_million, self.output_per_million, self.cached_per_million)
        for tier in self.tiers:  # by start, ascending
            if input_tokens > tier.start:
                rates = (tier.input, tier.output, tier.cached)
        return rates[0], rates[1], rates[0] if rates[2] is None else rates[2]

    def cost(self, usage, reasoning_tokens: int = 0, cached_tokens: int = 0, requests: int = 1) -> float:
        """The estimate of `requests` requests (one by default) that used `usage` in all,
        `reasoning_tokens` of their output spent on reasoning, `cached_tokens` of their input read
        from the provider's cache (the tier: that of their mean input)."""
        input_rate, output_rate, cached_rate = self._rates(usage.input_tokens // max(1, requests))
        reasoning = 0
        if self.reasoning_per_million is not None:
            reasoning = max(0, min(int(reasoning_tokens), usage.output_tokens))
            reasoning_cost = reasoning * self.reasoning_per_million
        else:
            reasoning_cost = 0.0
        cached = max(0, min(int(cached_tokens), usage.input_tokens))
        tokens = ((usage.input_tokens - cached) * input_rate + cached * cached_rate
                  + (usage.output_tokens - reasoning) * output_rate + reasoning_cost)
        return tokens / 1e6 + self.request * requests

    def bound(self, input_tokens: int, max_tokens: int, requests: int = 1) -> float:
        """The most `requests` requests (one by default) can cost: `input_tokens` in all (none of
        them cached; the tier: that of their mean) and `max_tokens` out in all, every output token
        at the dearer of the output and reasoning prices."""
        input_rate, output_rate, _ = self._rates(input_tokens // max(1, requests))
        out = max(output_rate, self.reasoning_per_million or 0.0)
        return (input_tokens * input_rate + max_tokens * out) / 1e6 + self.request * requests

    @property
    def free(self) -> bool:
        return self.bound(1, 1) == 0 and self.batched().bound(1, 1) == 0

    def batched(self) -> "Price":
        """The price of a request sent through a batch API: the one the source gives, else
        `BATCH_SHARE` of this one."""
        if self.batch is not None:
            return self.batch
        share = BATCH_SHARE

        def part(x: float | None) -> float | None:
            return None if x is None else x * share

        return Price(self.input_per_million * share, self.output_per_million * share, self.request * share,
                     part(self.reasoning_per_million), part(self.cached_per_million), None,
                     tuple(Tier(t.start, t.input * share, t.output * share, part(t.cached)) for t in self.tiers),
                     self.source)

    def text(self) -> str:
        """`$2.50 in, $10.00 out per million tokens (cached input $1.25; batch $1.25 in, $5.00 out)`."""
        if self.free:
            return "free"
        extra = []
        if self.cached_per_million is not None:
            extra.append(f"cached input ${_usd(self.cached_per_million)}")
        if self.reasoning_per_million is not None:
            extra.append(f"reasoning ${_usd(self.reasoning_per_million)}")
        if self.request:
            extra.append(f"${_usd(self.request)} a request")
        if self.tiers:
            extra.append("dearer past " + ", ".join(f"{t.start} input tokens" for t in self.tiers))
        batch = self.batched()
        extra.append(f"batch ${_usd(batch.input_per_million)} in, ${_usd(batch.output_per_million)} out")
        return (f"${_usd(self.input_per_million)} in, ${_usd(self.output_per_million)} out per million tokens "
                f"({'; '.join(extra)})")


def _usd(x: float) -> str:
    """A price without noise: two decimals at least, up to six (`2.50`, `0.075`, `0.000125`)."""
    text = f"{x:.6f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def configured(setting, source: str) -> Price:
    """The Price of a `price` setting (config.model.PriceSetting) found at `source`
    (`roles.parent.price`): its batch prices when set (a cached input token in batch at the lower
    of the batch input and cached input prices), else the published batch rate."""
    batch = None
    if setting.batch_input is not None and setting.batch_output is not None:
        cached = setting.cached_input
        batch = Price(setting.batch_input, setting.batch_output,
                      cached_per_million=None if cached is None else min(cached, setting.batch_input),
                      source=source)
    return Price(setting.input, setting.output, cached_per_million=setting.cached_input, batch=batch,
                 source=source)


def configured_price(provider, role, role_key: str) -> Price | None:
    """The price the configuration gives a role (llm/settings.py protocols): its own `price`
    (`role_key`: where it is configured, `roles.parent`), else its provider's; None when neither
    is set."""
    if role.price is not None:
        return configured(role.price, f"{role_key}.price")
    if provider.price is not None:
        return configured(provider.price, f"providers.{provider.name}.price")
    return None


def _per_million(value: Any, unit: Any) -> float | None:
    if isinstance(value, str):  # OpenRouter: USD per token, as a string
        try:
            number = float(value) * 1_000_000
        except ValueError:
            return None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if unit != "per_million_tokens":  # NanoGPT: numbers, per million tokens
            return None
        number = float(value)
    else:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return number


def _per_request(value: Any) -> float:
    """OpenRouter's `pricing.request`: USD per request, as a string; anything else counts 0."""
    if not isinstance(value, str):
        return 0.0
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


def entries(doc: Any) -> list | None:
    """The model entries of a listing: `data[]` or a top-level array."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        return doc["data"]
    return None


def price_in(listing: list, model: str) -> Price | None:
    for entry in listing:
        if not isinstance(entry, dict) or entry.get("id") != model:
            continue
        pricing = entry.get("pricing")
        if not isinstance(pricing, dict):
            return None
        unit = pricing.get("unit")
        prompt = _per_million(pricing.get("prompt"), unit)
        completion = _per_million(pricing.get("completion"), unit)
        if prompt is None or completion is None:
            return None
        reasoning = _per_million(pricing.get("internal_reasoning"), unit)
        cached = _per_million(pricing.get("input_cache_read"), unit)
        return Price(prompt, completion, _per_request(pricing.get("request")),
                     reasoning if reasoning else None, cached if cached else None)
    return None


class PendingPrice:
    """A price being looked up on a daemon thread; `get()` waits for it (None when unknown)."""

    def __init__(self, find):
        self._lookup = in_daemon("price-lookup", _look_up, find)

    def get(self) -> Price | None:
        return None if self._lookup.exception() is not None else self._lookup.result()


def _look_up(find) -> Price | None:
    try:
        return find()
    except Exception as e:  # noqa: BLE001 - an unknown price never fails anything
        log.warning("cannot read model prices (%s); showing tokens only", e)
        return None


class PriceBook:
    def __init__(self, timeout: float = LISTING_TIMEOUT):
        self.timeout = timeout
        self._listings: dict[tuple[str, str], Any] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._unlisted: set[tuple[str, str, str]] = set()  # the models said to have no price (once)

    def _lock_for(self, key: tuple[str, str]) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def listing(self, channel, headers: dict[str, str]) -> list | None:
        """The provider's model entries (fetched once), or None when they cannot be read."""
        key = (channel.name, channel.base)
        with self._lock_for(key):
            cached = self._listings.get(key, _MISSING)
            if cached is _MISSING:
                cached = self._listings[key] = self._fetch(channel, headers)
            return cached

    def _fetch(self, channel, headers: dict[str, str]) -> list | None:
        # lazy: the HTTP stack, only when a listing is read (`config check` shows prices without it)
        from overbrainer.llm.http import request_once

        try:
            doc = request_once(
                channel, "GET", LISTING_PATH, headers=headers, timeout=self.timeout,
                connect_timeout=self.timeout,
            )
        except LlmError as e:
            if e.transport is FailureKind.TIMEOUT:
                log.warning("model prices not received within %gs; showing tokens only", self.timeout)
            else:
                log.warning("cannot read model prices (%s); showing tokens only", e)
            return None
        found = entries(doc)
        if found is None:
            log.warning("cannot read model prices (invalid response: no model list); showing tokens only")
        return found

    def lookup(self, channel, headers: dict[str, str], model: str, *, lists: bool = True,
               database: Callable[[], Price | None] | None = None) -> PendingPrice:
        """`price(...)` fetched beside the caller's work."""
        return PendingPrice(lambda: self.price(channel, headers, model, lists=lists, database=database))

    def price(self, channel, headers: dict[str, str], model: str, *, lists: bool = True,
              database: Callable[[], Price | None] | None = None) -> Price | None:
        """The model's price from the provider's listing (read when it `lists` prices), else from
        `database` (llm/price_db.py), else None."""
        found = None
        if lists:
            listing = self.listing(channel, headers)
            found = None if listing is None else price_in(listing, model)
        if found is None and database is not None:
            found = database()
        if found is None and self._first_unlisted((channel.name, channel.base, model)):
            log.info("no price known for model %s; showing tokens only", model)
        return found

    def _first_unlisted(self, key: tuple[str, str, str]) -> bool:
        """Whether the model is found unlisted for the first time (a client rebuilt between a
        run's stages looks its price up again: said once per command)."""
        with self._lock:
            first = key not in self._unlisted
            self._unlisted.add(key)
            return first
