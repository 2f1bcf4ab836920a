"""`config check --probe`, the roles: per role, a request that proves the setup works before a paid
stage does (docs/stages.md#probe).

1. The provider's model listing (`GET /models`), when it has one: the role's model must be in it
   (a dated id of an Anthropic alias, an Ollama `:latest` tag or an OpenRouter `:variant` of a
   listed model counts). llama.cpp serves one model whatever the name asked: its listing is not
   judged. A listing proves little: OpenRouter's needs no key at all.
2. An authenticated request with the role's model, as the stages send it: a chat asking for one
   token (the role's reasoning settings kept, except Anthropic's thinking, whose budget must stay
   under `max_tokens`: the probe asks without it), or, for the embedder, the embedding of one word.

Nothing is retried; each failure is one line naming the provider and what to fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from overbrainer.config.check import show_url
from overbrainer.config.model import Config
from overbrainer.errors import OverbrainerError
from overbrainer.llm import anthropic_protocol, dialects, meanings, openai_protocol
from overbrainer.llm.errors import LlmError
from overbrainer.llm.http import channel_for, request_once
from overbrainer.llm.prices import entries
from overbrainer.llm.types import ChatRequest
from overbrainer.support.frozen import replace

LISTING_TIMEOUT = 10.0
ASK_TIMEOUT = 60.0  # a local server may load the model first
LISTING = "/models"
_NO_LISTING = (404, 405)
_DATED = re.compile(r"-\d{8}$")


@dataclass
class Probe:
    role: str
    provider: str
    base_url: str | None
    ok: bool
    detail: str

    def line(self) -> str:
        where = f"{self.provider} ({self.base_url})" if self.base_url else self.provider
        return f"probe {self.role}: {where} {'ok' if self.ok else 'FAILED'}: {self.detail}"

    @property
    def name(self) -> str:
        return self.role

    def to_dict(self) -> dict:
        return {"role": self.role, "provider": self.provider, "base_url": self.base_url, "ok": self.ok,
                "detail": self.detail}


def probe(config: Config) -> list[Probe]:
    """One Probe per configured role, in the order generator, parent, embedder, judge."""
    return [_probe_role(config, name, role) for name, role in config.roles.all()]


def _probe_role(config: Config, name: str, role) -> Probe:
    provider = config.providers[role.provider]
    shown = show_url(provider.base_url)

    def result(ok: bool, detail: str) -> Probe:
        return Probe(name, role.provider, shown, ok, detail)

    if not provider.base_url:
        return result(False, f"base_url is not set: set OVERBRAINER_PROVIDERS__{provider.name.upper()}__BASE_URL")
    try:
        return result(True, _ask(provider, name, role))
    except LlmError as e:
        return result(False, _with_fix(str(e), e, provider, name))
    except OverbrainerError as e:
        return result(False, str(e))


def _with_fix(text: str, error, provider, role_name: str) -> str:
    """The error, and what to check when it does not say so itself."""
    if getattr(error, "transport", None) and error.status is None:
        return f"{text}: check OVERBRAINER_PROVIDERS__{provider.name.upper()}__BASE_URL"
    if error.status in (400, 404, 422):
        return f"{text}: check roles.{role_name}.model and the role's settings"
    return text


def listed(model: str, ids: set[str]) -> bool:
    """Whether a listing names `model`: itself, its dated id (an Anthropic alias), its `:latest`
    tag (Ollama), or the model a `:variant` suffix is of (OpenRouter's `:nitro`, `:floor`…)."""
    if model in ids or f"{model}:latest" in ids:
        return True
    if any(i.startswith(f"{model}-") and _DATED.search(i) and len(i) == len(model) + 9 for i in ids):
        return True
    base, colon, _ = model.partition(":")
    return bool(colon) and base in ids


def _ask(provider, name: str, role) -> str:
    """The probe's two requests; the ok line's detail, else raises the error that failed it."""
    anthropic = provider.protocol == "anthropic"
    wire = anthropic_protocol if anthropic else openai_protocol
    api_key = provider.api_key.resolve() if provider.api_key is not None else None
    headers = wire.headers(api_key)
    channel = channel_for(provider.name, provider.base_url, 1)
    dialect = None if anthropic else dialects.get(provider.dialect)
    said = _listing(channel, headers, provider, role, anthropic, dialect)
    if name == "embedder":
        _send(channel, "POST", "/embeddings", wire.embed_body(role.model, ["ok"]), headers, provider, dialect)
        return f"{said}; an authenticated embedding answered"
    request = ChatRequest(user="Say OK.")
    if anthropic:  # thinking needs max_tokens above its budget: the probe asks without it
        body = wire.chat_body(replace(role, reasoning=False), request, 1, False)
    else:
        body = wire.chat_body(role, request, 1, False, dialect)
    _send(channel, "POST", wire.CHAT_PATH, body, headers, provider, dialect)
    return f"{said}; an authenticated 1-token chat with {role.model} answered"


def _listing(channel, headers, provider, role, anthropic: bool, dialect) -> str:
    """What the model listing says of the role's model; raises when it does not list it."""
    path = LISTING + ("?limit=1000" if anthropic else "")
    try:
        doc = request_once(channel, "GET", path, headers=headers, timeout=LISTING_TIMEOUT)
    except LlmError as e:
        if e.status not in _NO_LISTING:
            raise
        return "no model listing"
    ids = {str(m.get("id")) for m in entries(doc) or [] if isinstance(m, dict) and m.get("id")}
    if not ids:
        return "no model listing"
    if dialect is not None and dialect.name == dialects.LLAMACPP:
        return "llama.cpp serves its one model whatever the name"
    if not listed(role.model, ids):
        raise OverbrainerError(f"model {role.model} is not in provider {provider.name}'s model listing "
                               f"({len(ids)} models): check the model name in [roles]")
    return f"model {role.model} listed"


def _send(channel, method: str, path: str, body: dict, headers: dict, provider, dialect) -> None:
    protocol = "openai" if dialect is not None else "anthropic"
    name = dialect.name if dialect is not None else "generic"

    def explain(status, raw, retry_after):
        return meanings.explain(status, raw, retry_after, provider.name, dialect=name, protocol=protocol)

    doc = request_once(channel, method, path, body=body, headers=headers, timeout=ASK_TIMEOUT, explain=explain)
    if dialect is not None:
        error = meanings.in_body(doc, provider.name, name)
        if error is not None:
            raise error
