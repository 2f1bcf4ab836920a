"""Model prices from genai-prices, a maintained database of LLM prices (on PyPI): what a role's
price is when neither the configuration nor the provider's listing gives one
(docs/llm-requests.md#prices).

The package is imported here only, and only when a price is looked up in it: it loads its whole
database (and pydantic) on import, which a command that needs no price never pays. This module is
light to import (`config check` says where each role's price comes from with it): the database
is imported when a price is looked up in it.

Which of its providers a role's is: the anthropic protocol is `anthropic`; the `openai` and
`openrouter` dialects are `openai` and `openrouter`; a self-hosted server (llama.cpp, Ollama, vLLM)
is in no database; any other provider is matched by its base URL, when that is a public https
URL (Groq, Together, DeepSeek, Mistral, … by their API hosts). Its batch prices are its
`processing = batch` variant when the model has one.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from overbrainer.llm import dialects
from overbrainer.llm.prices import Price, Tier, configured_price

DISTRIBUTION = "genai-prices"
BATCH_CONTEXT = {"processing": "batch"}


def version() -> str:
    """The installed genai-prices' version. Asked only where the database is (or was) looked up,
    so importing the package costs nothing more here; `config check` on a provider no database
    can know never asks (nor pays importlib.metadata, which reading the version would import)."""
    try:
        # lazy: the database (and pydantic, httpx) only when a price is looked up in it
        import genai_prices
    except ImportError:
        return "(not installed)"
    return str(genai_prices.__version__)


def source() -> str:
    """`genai-prices 0.2.3`: a Price's `source` when the database gave it."""
    return f"{DISTRIBUTION} {version()}"


def where(protocol: str, dialect: str | None, base_url: str | None) -> dict[str, str] | None:
    """How the database names the provider: `{"provider_id": …}` or `{"provider_api_url": …}`;
    None when it cannot have it (a self-hosted server, a URL that is not public https)."""
    if str(protocol) == "anthropic":
        return {"provider_id": "anthropic"}
    if dialect in (dialects.OPENAI, dialects.OPENROUTER):
        return {"provider_id": dialect}
    if dialect in dialects.SELF_HOSTED or not base_url:
        return None
    try:
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if parts.scheme != "https" or not host or host == "localhost" or _loopback(host) or "." not in host:
        return None
    return {"provider_api_url": base_url}


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def missing(provider) -> str:
    """Why a role on `provider` (llm/settings.ProviderSettings) that the configuration gives no
    price has none: what was asked for one."""
    listing = dialects.lists_prices(provider.protocol, provider.dialect)
    database = where(provider.protocol, provider.dialect, provider.base_url) is not None
    if listing and database:
        return f"neither its model listing nor {source()} gives one"
    if database:
        return f"its model listing gives none and {source()} has none"
    if listing:
        return "its model listing gives none"
    return "a self-hosted server lists none"


def price_fix(role_key: str) -> str:
    """How to give a role a price (`role_key`: `roles.parent`)."""
    return (f"set {role_key}.price = {{ input = …, output = … }} (USD per million tokens), or price = 0 for a "
            "self-hosted server")


def unpriced(key: str, provider, model: str) -> str:
    """The refusal of a spend cap over a role with no price at all (`key`: `roles.parent`)."""
    return (f"{key} has no price ({model} on provider {provider.name}: {missing(provider)}), so the spend "
            f"cap (max_cost_usd, --max-cost) cannot bound its requests; {price_fix(key)}")


def known(provider, role, key: str) -> tuple[Price | None, bool]:
    """(Price or None, whether the provider's listing may give one when a stage reads it): what
    is known of a role's price (llm/settings protocols; `key`: `roles.parent`) without asking the
    provider: the configuration's, else the database's (imported only for a provider it can know)."""
    if role.price is not None or provider.price is not None:
        return configured_price(provider, role, key), False
    return (lookup(role.model, provider.protocol, provider.dialect, provider.base_url),
            dialects.lists_prices(provider.protocol, provider.dialect))


def describe(provider, role, key: str) -> str:
    """Where a role's price comes from, and what it is (`config check`): `$0.15 in, $0.60 out per
    million tokens (…), from genai-prices 0.2.3`, `from the provider's listing when a stage reads
    it, else …`, `unknown: …; set roles.parent.price = …`."""
    price, listing = known(provider, role, key)
    text = None if price is None else f"{price.text()}, from {price.source}"
    if listing:
        return f"from the provider's listing when a stage reads it, else {text or 'unknown: ' + price_fix(key)}"
    return text if text is not None else f"unknown: {missing(provider)}; {price_fix(key)}"


def refusals(roles) -> list[str]:
    """The spend cap's refusal (`unpriced`) of each of `roles`, (key, role, provider) triples, that
    has no price and whose provider's listing cannot give one either (`config check` under a cap)."""
    found = []
    for key, role, provider in roles:
        price, listing = known(provider, role, key)
        if price is None and not listing:
            found.append(unpriced(key, provider, role.model))
    return found


def lookup(model: str, protocol: str, dialect: str | None, base_url: str | None) -> Price | None:
    """The model's price in the database, None when it has none for this provider."""
    provider = where(protocol, dialect, base_url)
    if provider is None:
        return None
    try:
        online, batch = (_prices(model, provider, context) for context in (None, BATCH_CONTEXT))
    except LookupError:
        return None
    if batch.model_price == online.model_price:  # no batch price of its own: the published rate
        return _price(online.model_price)
    return _price(online.model_price, _price(batch.model_price))


def _prices(model: str, provider: dict[str, str], context: dict[str, str] | None) -> Any:
    """The database's PriceCalculation of no tokens: its `model_price` is the model's prices."""
    # lazy: the database (and pydantic, httpx) only when a price is looked up in it
    from genai_prices import Usage, calc_price

    nothing = Usage(input_tokens=0, output_tokens=0)
    if "provider_id" in provider:
        return calc_price(nothing, model, provider_id=provider["provider_id"], price_context=context)
    return calc_price(nothing, model, provider_api_url=provider["provider_api_url"], price_context=context)


def _price(prices: Any, batch: Price | None = None) -> Price | None:
    """A genai-prices ModelPrice as a Price (`batch`: its batch price): input, output, cached input
    (`cache_read_mtok`), reasoning and per-request prices, long-context tiers; None without an
    input price."""
    values = {k: getattr(prices, k, None) for k in ("input_mtok", "output_mtok", "cache_read_mtok")}
    if values["input_mtok"] is None:
        return None
    starts = sorted({t.start for v in values.values() if _tiered(v) for t in v.tiers})
    tiers = tuple(Tier(start, _at(values["input_mtok"], start), _at(values["output_mtok"], start),
                       _optional(values["cache_read_mtok"], start)) for start in starts)
    reasoning = getattr(prices, "output_reasoning_mtok", None)
    per_thousand = getattr(prices, "requests_kcount", None)
    return Price(_at(values["input_mtok"]), _at(values["output_mtok"]),
                 _at(per_thousand) / 1000 if per_thousand is not None else 0.0,
                 _at(reasoning) if reasoning is not None else None,
                 _optional(values["cache_read_mtok"]), batch, tiers, source())


def _tiered(value: Any) -> bool:
    return value is not None and hasattr(value, "tiers")


def _at(value: Any, start: int = -1) -> float:
    """A price as a float: a tiered one at the tier a request past `start` input tokens pays (its
    base below every tier); a missing one 0 (an embedding model has no output price)."""
    if value is None:
        return 0.0
    if not _tiered(value):  # a Decimal
        return float(value)
    price = value.base
    for tier in value.tiers:  # ascending
        if start >= tier.start:
            price = tier.price
    return float(price)


def _optional(value: Any, start: int = -1) -> float | None:
    return None if value is None else _at(value, start)
