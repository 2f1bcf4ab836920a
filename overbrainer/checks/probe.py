"""`config check --probe` (docs/stages.md#probe): the roles, then the training targets.

The roles: per role, a request that proves the setup works before a paid stage does.

1. The provider's model listing (`GET /models`), when it has one; a refused key (401/403) fails
   here, naming the API key's variable.
2. An authenticated request with the role's model, as the stages send it: a chat asking for one
   token (the role's reasoning settings kept, except Anthropic's thinking, whose budget must stay
   under `max_tokens`: the probe asks without it), or, for the embedder, the embedding of one word.
   A refused key fails here too (a listing proves little: OpenRouter's needs no key at all).
3. Only then the listing is judged: the role's model should be in it (a dated id of an Anthropic
   alias, an Ollama `:latest` tag or an OpenRouter `:variant` of a listed model counts); llama.cpp
   serves one model whatever the name asked, so its listing is not judged. A model the listing
   lacks is a warning when the request of step 2 answered (a server that serves any name), a
   failure when it did not.

Nothing is retried; each failure is one line naming the provider and what to fix.

The training targets (when `[training]` is set): each target is reached and shown able to train.

- `local`, `ssh`: connected (SSH: host key checked), then `axolotl --version` runs where the job
  would run it (runs/preflight.py: the venv's bin/, or the image).
- `runpod`: the API key reads Runpod's GPU catalog (no pod is created), and the GPU types asked
  for are in it (offered on Secure Cloud); `"auto"` must find a type that fits the target's limits
  and is in stock now. A listed type whose `maxCount` is below `gpu_count` is a shape the API
  refuses: a configuration error (ShapeRefused, exit 2), not a probe failure. The pod's own
  Axolotl is checked when a run starts, once the pod is up.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from overbrainer.config.check import show_url
from overbrainer.config.model import Config
from overbrainer.errors import ConfigError, OverbrainerError, PersonMustAct
from overbrainer.jobs.targets import open_executor
from overbrainer.llm import anthropic_protocol, dialects, meanings, openai_protocol
from overbrainer.llm.errors import LlmError
from overbrainer.llm.http import LlmSession, request_once
from overbrainer.llm.prices import entries
from overbrainer.llm.types import ChatRequest
from overbrainer.runpod import catalog
from overbrainer.runpod.api import RunpodClient
from overbrainer.runs.preflight import check_axolotl

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
    warning: bool = False  # ok, but the listing lacks the model
    act: bool = False  # failed with a refusal only a person can fix (errors.PersonMustAct)

    def line(self) -> str:
        where = f"{self.provider} ({self.base_url})" if self.base_url else self.provider
        word = "FAILED" if not self.ok else "warning" if self.warning else "ok"
        return f"probe {self.role}: {where} {word}: {self.detail}"

    @property
    def name(self) -> str:
        return self.role

    def to_dict(self) -> dict:
        return {"role": self.role, "provider": self.provider, "base_url": self.base_url, "ok": self.ok,
                "warning": self.warning, "detail": self.detail}


def probe(config: Config) -> list[Probe]:
    """One Probe per configured role, in the order generator, parent, embedder, judge (the
    probe's own channels, closed once it is done)."""
    with LlmSession() as llm:
        return [_probe_role(config, name, role, llm) for name, role in config.roles.all()]


def _probe_role(config: Config, name: str, role, llm: LlmSession) -> Probe:
    provider = config.providers[role.provider]
    shown = show_url(provider.base_url)

    def result(ok: bool, detail: str, warning: bool = False, act: bool = False) -> Probe:
        return Probe(name, role.provider, shown, ok, detail, warning, act)

    if not provider.base_url:
        return result(False, f"base_url is not set: set OVERBRAINER_PROVIDERS__{provider.name.upper()}__BASE_URL")
    try:
        return result(True, *_ask(provider, name, role, llm))
    except LlmError as e:
        return result(False, _with_fix(str(e), e, provider, name), act=isinstance(e, PersonMustAct))
    except OverbrainerError as e:
        return result(False, str(e), act=isinstance(e, PersonMustAct))


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


def _ask(provider, name: str, role, llm: LlmSession) -> tuple[str, bool]:
    """The probe's requests: the ok line's detail and whether it is a warning, else raises the
    error that failed it."""
    anthropic = provider.protocol == "anthropic"
    wire = anthropic_protocol if anthropic else openai_protocol
    api_key = provider.api_key.resolve() if provider.api_key is not None else None
    headers = wire.headers(api_key)
    channel = llm.channel(provider.name, provider.base_url, 1)
    dialect = None if anthropic else dialects.get(provider.dialect)
    explain = _explainer(provider, dialect)
    ids = _listing(channel, headers, anthropic, explain)
    if dialect is not None and dialect.name == dialects.LLAMACPP and ids:
        ids = None  # one model served whatever the name: nothing to judge
    path, body, asked = _request(wire, name, role, dialect)
    unlisted = bool(ids and not listed(role.model, ids))
    missing = f"model {role.model} is not in provider {provider.name}'s model listing ({len(ids or ())} models)"
    try:
        _send(channel, path, body, headers, provider, dialect, explain)
    except LlmError as e:
        if unlisted and e.status not in (401, 403) and not getattr(e, "transport", None):
            raise OverbrainerError(f"{missing}, and the request with it failed ({e}): check the model name "
                                   "in [roles]") from e
        raise
    if unlisted:
        return f"{missing}, but {asked} (a server that answers any name lists only what it has loaded)", True
    if ids is None:
        said = ("llama.cpp serves its one model whatever the name" if dialect is not None
                and dialect.name == dialects.LLAMACPP else "no model listing")
    else:
        said = f"model {role.model} listed"
    return f"{said}; {asked}", False


def _request(wire, name: str, role, dialect) -> tuple[str, dict, str]:
    """The authenticated request with the role's model: (path, body, what its answer proves)."""
    if name == "embedder":
        return "/embeddings", wire.embed_body(role.model, ["ok"]), "an authenticated embedding answered"
    request = ChatRequest(user="Say OK.")
    if wire is anthropic_protocol:  # thinking needs max_tokens above its budget: the probe asks without it
        body = wire.chat_body(replace(role, reasoning=False), request, 1, False)
    else:
        body = wire.chat_body(role, request, 1, False, dialect)
    return wire.CHAT_PATH, body, f"an authenticated 1-token chat with {role.model} answered"


def _listing(channel, headers, anthropic: bool, explain) -> set[str] | None:
    """The ids of the provider's model listing (None: it has none); a refused key raises."""
    path = LISTING + ("?limit=1000" if anthropic else "")
    try:
        doc = request_once(channel, "GET", path, headers=headers, timeout=LISTING_TIMEOUT, explain=explain)
    except LlmError as e:
        if e.status not in _NO_LISTING:
            raise
        return None
    ids = {str(m.get("id")) for m in entries(doc) or [] if isinstance(m, dict) and m.get("id")}
    return ids or None


def _explainer(provider, dialect):
    protocol = "openai" if dialect is not None else "anthropic"
    name = dialect.name if dialect is not None else "generic"

    def explain(status, raw, retry_after):
        return meanings.explain(status, raw, retry_after, provider.name, dialect=name, protocol=protocol)
    return explain


def _send(channel, path: str, body: dict, headers: dict, provider, dialect, explain) -> None:
    doc = request_once(channel, "POST", path, body=body, headers=headers, timeout=ASK_TIMEOUT, explain=explain)
    if dialect is not None:
        error = meanings.in_body(doc, provider.name, dialect.name)
        if error is not None:
            raise error


# --- The training targets.


class ShapeRefused(ConfigError):
    """A target asks for a pod or cluster shape Runpod's catalog says the API refuses (more GPUs
    a pod than a type's `maxCount`): `config check` exits 2 naming the key, as for any bad key."""


@dataclass
class TargetProbe:
    target: str
    kind: str
    ok: bool
    detail: str
    act: bool = False  # failed with a refusal only a person can fix (errors.PersonMustAct)
    refused: bool = False  # a shape Runpod's API refuses (ShapeRefused): a configuration error

    def line(self) -> str:
        return f"probe target {self.target} ({self.kind}) {'ok' if self.ok else 'FAILED'}: {self.detail}"

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "ok": self.ok, "detail": self.detail}


def probe_targets(config) -> list[TargetProbe]:
    """One TargetProbe per configured target, by name; none without `[training]`."""
    if config.training is None:
        return []
    return [_probe(config, name, target) for name, target in sorted(config.targets.items())]


def _probe(config, name: str, target) -> TargetProbe:
    kind = target.kind
    try:
        detail = _runpod(config, name, target) if kind == "runpod" else _runs_axolotl(config, name, target)
    except ShapeRefused as e:
        return TargetProbe(name, kind, False, str(e), refused=True)
    except OverbrainerError as e:
        return TargetProbe(name, kind, False, str(e).removeprefix(f"target `{name}`: "), isinstance(e, PersonMustAct))
    return TargetProbe(name, kind, True, detail)


def _runs_axolotl(config, name: str, target) -> str:
    with tempfile.TemporaryDirectory(prefix="overbrainer-probe-") as scratch:  # a local executor makes its
        executor = open_executor(config, name, target, Path(scratch))        # folder: not runs/ (read-only)
        try:
            return f"reached; {check_axolotl(executor, name, target)}"
        finally:
            executor.close()


def _runpod(config, name: str, target) -> str:
    wanted = catalog.Wanted.of(target)
    with RunpodClient.from_config(config, attempts=1) as client:
        types = client.gpu_types(target.gpu_count, cluster=target.cluster)
        by_id = {g.id: g for g in types}
        missing = [] if wanted.gpu_types == catalog.AUTO else [n for n in wanted.gpu_types if n not in by_id]
        # A listing scoped to gpu_count may leave out a type whose ceiling is below it: read the
        # ceilings (one GPU a pod) to tell a shape the API refuses from a type it does not have.
        ceilings = ({g.id: g for g in client.gpu_types(1, cluster=target.cluster)}
                    if missing and wanted.gpu_count > 1 else {})
    if wanted.gpu_types == catalog.AUTO:
        picked = catalog.pick(wanted, types)  # NotInStock says why nothing fits
        return f"the API key reads the GPU catalog; gpu_types = \"auto\" would try {_names(c.gpu_type for c in picked)}"
    refused = [g for g in (by_id.get(n) or ceilings.get(n) for n in wanted.gpu_types)
               if g is not None and 0 < g.max_count < wanted.gpu_count]
    if refused:
        limits = ", ".join(f"{g.max_count} of `{g.id}`" for g in refused)
        per = "per pod of a cluster" if target.cluster else "per pod"
        raise ShapeRefused(f"targets.{name}.gpu_count = {wanted.gpu_count}: Runpod's catalog allows at most "
                           f"{limits} {per} (maxCount): lower gpu_count or change "
                           f"targets.{name}.gpu_types")
    problems = []
    for gpu_name in wanted.gpu_types:
        gpu = by_id.get(gpu_name)
        if gpu is None:
            problems.append(f"`{gpu_name}` is not in Runpod's GPU catalog")
        elif not gpu.secure or gpu.price_per_hour is None:
            problems.append(f"`{gpu_name}` is not offered on Secure Cloud")
    if problems:
        raise OverbrainerError("; ".join(problems) + ": `overbrainer pod gpus` lists the GPU types")
    stocked = [n for n in wanted.gpu_types if by_id[n].in_stock]
    stock = f"in stock now: {_names(stocked)}" if stocked else "none of them is in stock right now"
    return f"the API key reads the GPU catalog; every GPU type asked for is offered ({stock})"


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") if names else "none"
