"""`connect()` builds the client of one role; `LlmClient` sends chats and embeddings through the
provider's channel of the caller's LlmSession (llm/http.py) with the retry policy and the
provider's circuit breaker, in the
provider's dialect (llm/dialects.py), and decides what an error answer means for the caller: a
moderation flag is an answer (`ChatResponse.flagged`), a 402 that names an affordable limit is
retried once with it, money errors stop everything (`credits: …`).

The model's price is the configured one (`price` on the role or its provider), else it is looked up
beside the work (PriceBook.lookup: the provider's listing, then the genai-prices database): the
first request never waits for it; a cost is computed once it is known."""

from __future__ import annotations

import logging
import math
import re
import threading
from typing import Any, BinaryIO, Callable

from overbrainer.errors import ConfigError
from overbrainer.llm import anthropic_protocol, dialects, meanings, openai_protocol, price_db, thinking
from overbrainer.llm.errors import UNSUPPORTED_EMBEDDINGS, CreditsError, KeyRefused, LlmError, Moderated, unsupported
from overbrainer.llm.http import Channel, LlmSession, Pace, Raw, Reading, send
from overbrainer.llm.pacing import Configured, Pacer, prompt_tokens
from overbrainer.llm.prices import PendingPrice, Price, PriceBook, configured_price
from overbrainer.llm.settings import PipelineSettings, ProviderSettings, RoleSettings
from overbrainer.llm.spend import Spend
from overbrainer.llm.types import CONTENT_FILTER, NONE, ChatRequest, ChatResponse
from overbrainer.support import redact
from overbrainer.support.usage import Usage


log = logging.getLogger(__name__)

PROTOCOLS = {"openai": openai_protocol, "anthropic": anthropic_protocol}
EMBED_CHUNK = 256
# What a request's framing may add to its prompt (roles, chat template, a JSON schema), in tokens.
PROMPT_FRAMING = 256
# A 400/422 whose message names one of these refuses structured output (not a transport error).
_NAMES_STRUCTURED = re.compile(r"response_format|json_schema|structured output|json mode", re.I)


def refuses_structured(e: LlmError) -> bool:
    return e.status in (400, 422) and bool(_NAMES_STRUCTURED.search(str(e)))


def _protocol_name(value: Any) -> str:
    return str(getattr(value, "value", value)).lower()


def _valid_header_value(text: str) -> bool:
    return all(32 <= ord(c) < 127 for c in text)


class LlmClient:
    """The client of one role. Thread-safe: share it between the threads of a stage."""

    def __init__(
        self,
        *,
        provider_name: str,
        protocol: str,
        channel: Channel,
        role: RoleSettings,
        pipeline: PipelineSettings,
        api_key: str | None,
        price: Price | PendingPrice | None,
        stop: threading.Event | None = None,
        dialect: str | None = None,
        pacer: Pacer | None = None,
    ):
        self.provider_name = provider_name
        self.protocol = protocol
        self.dialect = (dialect or dialects.GENERIC) if protocol == "openai" else None
        self._dialect = dialects.get(self.dialect) if self.dialect else None
        self.model = role.model
        self.role = role
        self._price = price
        self.channel = channel
        self.pacer = pacer  # the model's pacer at the provider's rate limits (llm/pacing.py), if any
        self.stop = stop
        self._wire = PROTOCOLS[protocol]
        self._headers = self._wire.headers(api_key)
        self._keyless = api_key is None
        # Every setting comes from the configuration's records, whose defaults are config/model's.
        self._timeout = float(pipeline.request_timeout_secs)
        self._max_retries = pipeline.max_retries
        self._max_tokens = role.max_tokens
        self._structured_ok = protocol == "openai"

    def __repr__(self) -> str:
        return f"LlmClient({self.provider_name}/{self.model}, {self.dialect or self.protocol})"

    @property
    def price(self) -> Price | None:
        """The model's price (waits for the listing being read beside the work, if it is)."""
        if isinstance(self._price, PendingPrice):
            self._price = self._price.get()
        return self._price

    def priced(self, batch: bool = False) -> Price | None:
        """The price of a request sent online, or through the batch API (`batch`)."""
        price = self.price
        return price.batched() if price is not None and batch else price

    def cost(self, usage) -> float | None:
        """The estimate of one request that used `usage`."""
        price = self.price
        return None if price is None else price.cost(usage)

    def max_tokens(self, req: ChatRequest) -> int:
        """The output limit `req` is sent with."""
        return req.max_tokens or self._max_tokens

    def bound(self, req: ChatRequest, batch: bool = False) -> float:
        """The most `req` can cost (sent online, or in a batch): its prompt counted a token per
        byte (a token is never shorter than a byte), plus its framing, plus `max_tokens` of
        output; infinite when the model's price is unknown."""
        price = self.priced(batch)
        if price is None:
            return math.inf
        prompt = len(req.user.encode()) + len((req.system or "").encode()) + PROMPT_FRAMING
        return price.bound(prompt, self.max_tokens(req))

    def spend(self, response: ChatResponse, batch: bool = False) -> Spend:
        """What `response` cost (an answer of the batch API when `batch`): the provider's bill
        when its dialect reports one, else the estimate from the model's price (kept beside the
        bill). A flagged input cost nothing."""
        if response.flagged is not None:
            return Spend(0.0, 0.0)
        price = self.priced(batch)
        estimate = None if price is None else price.cost(response.usage, response.reasoning_tokens,
                                                         response.cached_tokens)
        billed = response.billed if self._dialect is not None and self._dialect.billed_cost else None
        if billed is not None:
            return Spend(billed, estimate, True)
        return Spend(estimate, estimate)

    def drop_structured(self, why: str) -> None:
        """The provider refused structured output: ask for plain text from now on."""
        if self._structured_ok:
            log.info("%s/%s: structured output refused (%s); asking without it", self.provider_name,
                     self.model, why)
        self._structured_ok = False

    def call(self, method: str, path: str, *, body: Any = None, raw: tuple[bytes, str] | None = None,
             decode: bool = True, stop: threading.Event | None = None, into: BinaryIO | None = None,
             creates: bool = False) -> Any:
        """Any other request to the provider (the batch APIs: llm/batch_*.py), through the same
        channel, headers, retries and error meanings as a chat. `into`: the answer's body is
        written to this file as it arrives (a batch's results), not kept in memory. `creates`:
        it creates something billed (a batch): never retried blindly, AnswerLost when it may have
        been applied (llm/http.py)."""
        return self._send(path, body, None, stop, chat=True, method=method, raw=raw, decode=decode, into=into,
                          creates=creates)

    def chat_body(self, req: ChatRequest, structured: bool = False) -> dict:
        """The body `req` is sent with online (token limit, dialect, reasoning): a batch request
        carries the very same."""
        return self._body(req, self.max_tokens(req), structured and self._structured_ok)

    def parse_chat(self, doc: Any) -> ChatResponse:
        """An answer's body as a chat reads it (an OpenAI body carrying an error raises it)."""
        if self.protocol == "openai":
            carried = meanings.in_body(doc, self.provider_name, self.dialect or dialects.GENERIC)
            if carried is not None:
                raise carried
        return self._wire.parse_chat(doc)

    def _body(self, req: ChatRequest, max_tokens: int, structured: bool) -> dict:
        wire = self._wire
        if wire is openai_protocol:
            return wire.chat_body(self.role, req, max_tokens, structured, self._dialect)
        return wire.chat_body(self.role, req, max_tokens, structured)

    def _send(self, path: str, body: Any, on_retry, stop, chat: bool = False, method: str = "POST",
              raw: tuple[bytes, str] | None = None, decode: bool = True, into: BinaryIO | None = None,
              creates: bool = False, pace: Pace | None = None) -> Any:
        explain = inspect = None
        if chat:
            protocol, dialect, name = self.protocol, self.dialect or dialects.GENERIC, self.provider_name

            keyless = self._keyless

            def explain(status, raw, retry_after):
                error = meanings.explain(status, raw, retry_after, name, dialect=dialect, protocol=protocol)
                if keyless and isinstance(error, KeyRefused):  # it wants a key, and none is set
                    return KeyRefused(name, status, missing=True)
                return error

            if protocol == "openai" and method == "POST" and path == openai_protocol.CHAT_PATH:
                def inspect(doc):
                    return meanings.in_body(doc, name, dialect)
        return send(
            self.channel,
            method,
            path,
            body=Raw(*raw) if raw is not None else body,
            headers=self._headers,
            timeout=self._timeout,
            max_retries=self._max_retries,
            on_retry=on_retry,
            stop=stop if stop is not None else self.stop,
            reading=Reading(explain, inspect, decode, into, creates),
            pace=pace,
        )

    def _pace(self, input_tokens: int, output_tokens: int, usage: Callable[[Any], Usage]) -> Pace | None:
        """How a request waits for the model's pacer: its estimated tokens, how its usage is read."""
        return None if self.pacer is None else Pace(self.pacer, input_tokens, output_tokens, usage)

    def _exchange(self, req: ChatRequest, max_tokens: int, structured: bool, on_retry, stop) -> ChatResponse:
        body = self._body(req, max_tokens, structured)
        pace = self._pace(prompt_tokens(req.system, req.user), max_tokens, self._wire.parse_usage)
        return self._wire.parse_chat(self._send(self._wire.CHAT_PATH, body, on_retry, stop, chat=True, pace=pace))

    def _ask(self, req: ChatRequest, max_tokens: int, structured: bool, on_retry, stop) -> ChatResponse:
        """One chat as the provider means it: a moderation flag becomes a flagged answer; a 402
        naming a limit the account can afford is sent once more with that limit when it is at
        least what the caller needs (`req.min_tokens`), else it stops everything."""
        limit, need = max_tokens, min(req.min_tokens or max_tokens, max_tokens)
        for second in (False, True):
            try:
                return self._exchange(req, limit, structured, on_retry, stop)
            except Moderated as e:
                log.debug("%s/%s: %s", self.provider_name, self.model, e)
                return ChatResponse("", None, NONE, CONTENT_FILTER, Usage(), flagged=e.reasons)
            except CreditsError as e:
                if second or e.afford is None or not need <= e.afford < limit:
                    raise
                if on_retry is not None:
                    on_retry(f"{e}; retrying once with max_tokens {e.afford}")
                limit = e.afford
        raise AssertionError("unreachable")  # pragma: no cover

    def chat(
        self,
        req: ChatRequest,
        on_retry: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> ChatResponse:
        """Send one chat (with HTTP retries). A structured request the provider refuses (a 400/422
        naming response_format) is sent once more without it (on_retry says so), and this client
        stops asking for structured output. Any other error (transport ones too) is raised."""
        max_tokens = self.max_tokens(req)
        structured = req.structured and self._structured_ok
        try:
            return self._ask(req, max_tokens, structured, on_retry, stop)
        except LlmError as e:
            if not structured or not refuses_structured(e):
                raise
            self.drop_structured(str(e))
            if on_retry is not None:
                on_retry(f"{e}; retrying without structured output")
        return self._ask(req, max_tokens, False, on_retry, stop)

    def embed(
        self,
        texts: list[str],
        on_retry: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> list[list[float]]:
        """Embeddings of `texts`, in order, requested in chunks of at most 256."""
        if self.protocol != "openai":
            raise unsupported(UNSUPPORTED_EMBEDDINGS)
        out: list[list[float]] = []
        texts = list(texts)
        for start in range(0, len(texts), EMBED_CHUNK):
            chunk = texts[start:start + EMBED_CHUNK]
            pace = self._pace(prompt_tokens(*chunk), 0, openai_protocol.parse_usage)
            doc = self._send(
                openai_protocol.EMBED_PATH, openai_protocol.embed_body(self.model, chunk), on_retry, stop, pace=pace
            )
            out.extend(openai_protocol.parse_embeddings(doc, len(chunk)))
        return out


def connect(
    provider: ProviderSettings,
    role: RoleSettings,
    pipeline: PipelineSettings,
    *,
    llm: LlmSession,
    prices: PriceBook | None = None,
    stop: threading.Event | None = None,
    role_key: str = "roles.<role>",
) -> LlmClient:
    """The client of `role` on `provider` (config.model records), on `llm`'s channel of the provider
    (its owner closes it), its API key registered with the redactor, its price the configured one
    (`role_key`: `roles.parent`), else the provider's listing's (once per book), else the database's."""
    name = provider.name
    protocol = _protocol_name(provider.protocol)
    if protocol not in PROTOCOLS:
        raise ConfigError(f"providers.{name}.protocol must be openai or anthropic")
    base_url = provider.base_url
    if not base_url:
        raise ConfigError(
            f"providers.{name}.base_url is not set (set OVERBRAINER_PROVIDERS__{name.upper()}__BASE_URL)"
        )
    api_key = _api_key(provider)
    dialect = _dialect(provider, protocol, role, base_url)
    concurrency = pipeline.concurrency
    channel = llm.channel(name, base_url, concurrency)
    _announce(channel, protocol, dialect, provider)
    channel.breaker.configure(concurrency, float(pipeline.request_timeout_secs))
    price = configured_price(provider, role, role_key) or _look_up(
        prices or PriceBook(), channel, PROTOCOLS[protocol].headers(api_key), provider, dialect, role.model)
    configured = Configured(provider.max_requests_per_minute, provider.max_tokens_per_minute)
    pacer = llm.pacer(channel, role.model, concurrency, configured, probe=dialects.publishes_limits(protocol, dialect))
    return LlmClient(
        provider_name=name,
        protocol=protocol,
        channel=channel,
        role=role,
        pipeline=pipeline,
        api_key=api_key,
        price=price,
        stop=stop,
        dialect=dialect,
        pacer=pacer,
    )


def _api_key(provider: ProviderSettings) -> str | None:
    """The provider's API key (None: none set), registered with the redactor."""
    if provider.api_key is None:
        return None
    api_key = provider.api_key.resolve()
    redact.register(api_key)
    if not _valid_header_value(api_key):
        raise LlmError(
            f"providers.{provider.name}.api_key is not a valid HTTP header value "
            f"(check OVERBRAINER_PROVIDERS__{provider.name.upper()}__API_KEY)",
            fatal=True,
        )
    return api_key


def _look_up(book: PriceBook, channel: Channel, headers: dict[str, str], provider: ProviderSettings,
             dialect: str | None, model: str) -> PendingPrice:
    """The price found beside the work: the provider's listing (when it can carry prices), then
    the genai-prices database."""
    protocol = _protocol_name(provider.protocol)

    def database() -> Price | None:
        return price_db.lookup(model, protocol, dialect, provider.base_url)

    return book.lookup(channel, headers, model, lists=dialects.lists_prices(protocol, dialect), database=database)


def _dialect(provider: ProviderSettings, protocol: str, role: RoleSettings, base_url: str) -> str | None:
    """The openai provider's dialect (as set, else what its URL suggests); for anthropic, None
    once the role's thinking is one the reference takes (ConfigError otherwise)."""
    if protocol == "openai":
        dialect = provider.dialect or dialects.guess(base_url)
        if dialect not in dialects.DIALECTS:
            raise ConfigError(f"providers.{provider.name}.dialect must be one of {', '.join(dialects.DIALECTS)}")
        return dialect
    refused = thinking.problems(f"the role on provider {provider.name}", role)
    if refused:
        raise ConfigError(refused[0])
    return None


def _announce(channel: Channel, protocol: str, dialect: str | None, provider: ProviderSettings) -> None:
    """Say once per provider how it is spoken to (the dialect, and whether it was guessed)."""
    if channel.announced:
        return
    channel.announced = True
    if dialect is None:
        log.info("provider %s: %s protocol", channel.name, protocol)
        return
    guessed = provider.dialect_guessed or not provider.dialect  # guessed here when it names none
    how = "guessed from its base URL" if guessed else "set in the configuration"
    log.info("provider %s: openai protocol, %s dialect (%s)", channel.name, dialect, how)
