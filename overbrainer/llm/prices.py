"""Model prices from a provider's model listing.

One `PriceBook` per command, shared by every role: each provider's listing is fetched at most once,
when the first role on it connects, within 10 s, on a thread of its own (`lookup`) so that no
request waits for it. Unknown prices never fail anything.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

from overbrainer.llm.errors import LlmError
from overbrainer.llm.http import request_once
from overbrainer.support.failure import FailureKind
from overbrainer.support.threads import in_daemon

log = logging.getLogger(__name__)

LISTING_PATH = "/models?detailed=true"
LISTING_TIMEOUT = 10.0
_MISSING = object()


@dataclass(frozen=True)
class Price:
    """USD per million tokens; `request`: USD per request (OpenRouter's `pricing.request`);
    `reasoning_per_million`: the price of reasoning tokens when the listing gives one apart
    (`pricing.internal_reasoning`), else they cost what output tokens cost."""

    input_per_million: float
    output_per_million: float
    request: float = 0.0
    reasoning_per_million: float | None = None

    def cost(self, usage, reasoning_tokens: int = 0) -> float:
        """The estimate of one request that used `usage`, `reasoning_tokens` of its output
        spent on reasoning."""
        reasoning = 0
        if self.reasoning_per_million is not None:
            reasoning = max(0, min(int(reasoning_tokens), usage.output_tokens))
            reasoning_cost = reasoning * self.reasoning_per_million
        else:
            reasoning_cost = 0.0
        tokens = (usage.input_tokens * self.input_per_million
                  + (usage.output_tokens - reasoning) * self.output_per_million + reasoning_cost)
        return tokens / 1e6 + self.request

    def bound(self, input_tokens: int, max_tokens: int) -> float:
        """The most one request can cost: `input_tokens` in and `max_tokens` out, every output
        token at the dearer of the output and reasoning prices."""
        out = max(self.output_per_million, self.reasoning_per_million or 0.0)
        return (input_tokens * self.input_per_million + max_tokens * out) / 1e6 + self.request


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
        return Price(prompt, completion, _per_request(pricing.get("request")),
                     reasoning if reasoning else None)
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

    def lookup(self, channel, headers: dict[str, str], model: str) -> PendingPrice:
        """`price(...)` fetched beside the caller's work."""
        return PendingPrice(lambda: self.price(channel, headers, model))

    def price(self, channel, headers: dict[str, str], model: str) -> Price | None:
        listing = self.listing(channel, headers)
        if listing is None:
            return None
        found = price_in(listing, model)
        if found is None and self._first_unlisted((channel.name, channel.base, model)):
            log.info("no price listed for model %s; showing tokens only", model)
        return found

    def _first_unlisted(self, key: tuple[str, str, str]) -> bool:
        """Whether the model is found unlisted for the first time (a client rebuilt between a
        run's stages looks its price up again: said once per command)."""
        with self._lock:
            first = key not in self._unlisted
            self._unlisted.add(key)
            return first
