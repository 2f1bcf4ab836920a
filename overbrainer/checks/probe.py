"""`config check --probe`: one cheap request per provider role, to learn before a paid stage
whether each provider answers with the configured URL and key.

The request is the provider's model listing (`GET /models`), free everywhere; a server without a
listing (404/405) gets one chat asking for a single token instead. Nothing is retried.
"""

from __future__ import annotations

from dataclasses import dataclass

from overbrainer.config.check import show_url
from overbrainer.config.model import Config
from overbrainer.errors import OverbrainerError
from overbrainer.llm import anthropic_protocol, dialects, openai_protocol
from overbrainer.llm.errors import LlmError
from overbrainer.llm.http import channel_for, request_once
from overbrainer.llm.prices import entries
from overbrainer.llm.types import ChatRequest

PROBE_TIMEOUT = 10.0
LISTING = "/models"
_NO_LISTING = (404, 405)


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
        return result(False, "base_url is not set")
    try:
        return result(True, _ask(provider, role, embeds=name == "embedder"))
    except OverbrainerError as e:
        return result(False, str(e))


def _ask(provider, role, *, embeds: bool) -> str:
    wire = anthropic_protocol if provider.protocol == "anthropic" else openai_protocol
    api_key = provider.api_key.resolve() if provider.api_key is not None else None
    headers = wire.headers(api_key)
    channel = channel_for(provider.name, provider.base_url, 1)
    try:
        doc = request_once(channel, "GET", LISTING, headers=headers, timeout=PROBE_TIMEOUT)
    except LlmError as e:
        if e.status not in _NO_LISTING or embeds:
            raise
        if wire is openai_protocol:
            body = wire.chat_body(role, ChatRequest(user="Say OK."), 1, False, dialects.get(provider.dialect))
        else:
            body = wire.chat_body(role, ChatRequest(user="Say OK."), 1, False)
        request_once(channel, "POST", wire.CHAT_PATH, body=body, headers=headers, timeout=PROBE_TIMEOUT)
        return "answered a 1-token chat (no model listing)"
    listed = entries(doc) or []
    ids = {str(m.get("id")) for m in listed if isinstance(m, dict)}
    if role.model in ids:
        return f"model listing has {role.model}"
    return f"answered the model listing ({len(ids)} models; {role.model} not among them)"
