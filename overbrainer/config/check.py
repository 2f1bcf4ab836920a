"""`config check`: the resolved configuration as `key = value` lines and as one dict.

Secrets show as `***` (or `(unset)`); the credentials and query of a URL are masked too.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from overbrainer.config.model import (
    DEFAULT_HUB_BASE_URL,
    DEFAULT_RUNPOD_BASE_URL,
    DEFAULT_RUNPOD_PROXY_URL,
    Benchmark,
    Config,
    LocalTarget,
    Provider,
    Role,
    RunpodTarget,
    Serve,
    SshTarget,
    Target,
)
from overbrainer.llm.thinking import mode, supported
from overbrainer.support.redact import MASK

UNSET = "(unset)"


def show_url(url: str | None) -> str | None:
    """The URL without its user:password and query (they may hold a key)."""
    if url is None:
        return None
    try:
        p = urlsplit(url)
        netloc = p.netloc
        if "@" in netloc:
            netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
        return urlunsplit((p.scheme, netloc, p.path, MASK if p.query else "", ""))
    except ValueError:
        return MASK


def _secret(s: Any) -> str | None:
    return MASK if s is not None else None


def _fmt(v: Any) -> str:
    if v is None:
        return UNSET
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, Benchmark):
        return v.path + (f" (fields {', '.join(v.fields)})" if v.fields else "")
    return str(v)


def _role_text(r: Role, protocol: str | None = None) -> str:
    extra = [f"reasoning: {_fmt(r.reasoning)}", f"max_tokens: {r.max_tokens}"]
    for k in ("temperature", "reasoning_effort", "thinking_budget"):
        if getattr(r, k) is not None:
            extra.append(f"{k}: {_fmt(getattr(r, k))}")
    if protocol == "anthropic":
        extra += thinking_text(r)
    return f"{r.provider}/{r.model} ({', '.join(extra)})"


def thinking_text(r: Role) -> list[str]:
    """The thinking an anthropic role asks for, and why (set, its model family, or its budget)."""
    chosen = mode(r)
    if chosen is None:
        return []
    if r.thinking:
        return [f"thinking: {chosen}"]
    why = "by model family" if supported(r.model) is not None else "by thinking_budget, model family unknown"
    return [f"thinking: {chosen} ({why})"]


def dialect_text(p: Provider) -> str:
    if not p.dialect_guessed:
        return str(p.dialect)
    return f"{p.dialect} (guessed from base_url)" if p.base_url else f"{p.dialect} (default: base_url not set)"


def target_text(t: Target) -> str:
    """One line per target with its defaults applied."""
    if isinstance(t, (LocalTarget, SshTarget)):
        if t.runtime == "native":
            how = f"native runtime, {'venv ' + t.venv if t.venv else 'axolotl from PATH'}"
        else:
            how = f"docker runtime ({t.engine}, image {t.image})"
        if isinstance(t, LocalTarget):
            return f"local, {how}"
        return f"ssh to {t.host or '(unset host: set OVERBRAINER_TARGETS__' + t.name.upper() + '__HOST)'}, " \
               f"{how}, workdir {t.workdir}"
    assert isinstance(t, RunpodTarget)
    parts = [f"gpu_types {_fmt(t.gpu_types)} x{t.gpu_count}", f"max_hours {_fmt(t.max_hours)}"]
    if t.cluster:
        parts.insert(0, f"cluster of {t.nodes} pods")
    for k in ("min_vram_gb", "max_price_per_hour", "max_cost_usd", "network_volume_id", "max_volume_gb"):
        if getattr(t, k) is not None:
            parts.append(f"{k} {_fmt(getattr(t, k))}")
    parts += [f"data_center_ids {_fmt(t.data_center_ids) if t.data_center_ids else 'any'}",
              f"container_disk_gb {t.container_disk_gb}", f"boot_grace_minutes {t.boot_grace_minutes}",
              f"retrieve_grace_minutes {t.retrieve_grace_minutes}", f"image {t.image}", f"venv {t.venv}"]
    return "runpod, " + ", ".join(parts)


def serve_text(serve: Serve) -> str:
    """`vllm Qwen/Qwen3-8B × 2 replicas on target gpu (…)`: what a served provider rents."""
    n = serve.replicas
    parts = [f"image {serve.image}", f"{serve.per_replica} requests in flight per replica"]
    if serve.engine_args:
        parts.append("engine_args " + " ".join(f"{k}={_fmt(v)}" for k, v in serve.engine_args))
    parts.append(f"keep_warm {serve.keep_warm_minutes:g} min" if serve.keep_warm_minutes
                 else "deleted after the command's last stage that uses it")
    return (f"{serve.engine} {serve.model} × {n} replica{'s' if n != 1 else ''} on target {serve.target} "
            f"({', '.join(parts)})")


def _section(obj: Any, skip: tuple[str, ...] = ()) -> str:
    return ", ".join(f"{f.name}: {_fmt(getattr(obj, f.name))}" for f in fields(obj) if f.name not in skip)


# A provider's limits (docs/llm-requests.md#rate-limits, docs/batch.md#limits), shown when set.
LIMIT_KEYS = ("max_requests_per_minute", "max_tokens_per_minute", "batch_queue_tokens")


PriceText = Callable[[Provider, Role, str], str]


def lines(config: Config, price_text: PriceText | None = None) -> list[tuple[str, str]]:
    """`price_text(provider, role, "roles.<name>")`: where a role's price comes from
    (llm/price_db.describe), a line after the role's."""
    out: list[tuple[str, str]] = [("project.name", config.project.name)]
    for t in config.topics:
        out.append((f"topics.{t.name}", f"{t.subtopics} subtopics x {t.questions_per_subtopic} questions"))
    for name, p in config.providers.items():
        out.append((f"providers.{name}.protocol", p.protocol))
        if p.dialect is not None:
            out.append((f"providers.{name}.dialect", dialect_text(p)))
        if p.serve is not None:
            out.append((f"providers.{name}.serve", serve_text(p.serve)))
            continue
        out.append((f"providers.{name}.base_url", _fmt(show_url(p.base_url))))
        out.append((f"providers.{name}.api_key", _fmt(_secret(p.api_key))))
        for key in LIMIT_KEYS:
            if getattr(p, key) is not None:
                out.append((f"providers.{name}.{key}", _fmt(getattr(p, key))))
    for name, role in config.roles.all():
        provider = config.providers.get(role.provider)
        out.append((f"roles.{name}", _role_text(role, provider.protocol if provider else None)))
        if provider is not None and price_text is not None:
            out.append((f"roles.{name}.price", price_text(provider, role, f"roles.{name}")))
    out.append(("pipeline", _section(config.pipeline)))
    out.append(("gate", _section(config.gate, ("json_schema",))))
    if config.gate.json_schema is not None:
        out.append(("gate.json_schema", ", ".join(sorted(config.gate.json_schema))))
    tr = config.training
    if tr is None:
        out.append(("training", f"{UNSET}: `run` stops after split"))
    else:
        out.append(("training", f"{tr.base_model} on {tr.target} ({tr.adapter})"))
        out.append(("training.settings", _section(tr, ("target", "base_model", "adapter", "axolotl_extra"))))
        if tr.axolotl_extra:
            out.append(("training.axolotl_extra", ", ".join(sorted(tr.axolotl_extra))))
    for name, target in config.targets.items():
        out.append((f"targets.{name}", target_text(target)))
    out.append(("runpod.api_key", _fmt(_secret(config.runpod.api_key))))
    out.append(("runpod.base_url", show_url(config.runpod.base_url) or f"{DEFAULT_RUNPOD_BASE_URL} (default)"))
    if any(p.serve is not None for p in config.providers.values()):
        out.append(("runpod.proxy_url", config.runpod.proxy_url or f"{DEFAULT_RUNPOD_PROXY_URL} (default)"))
    out.append(("export", _section(config.export)))
    out.append(("hub", _section(config.hub, ("base_url",)).replace(f"repo: {UNSET}", "repo: (default)")))
    out.append(("hub.base_url", show_url(config.hub.base_url) or f"{DEFAULT_HUB_BASE_URL} (default)"))
    out.append(("compare", _section(config.compare)))
    out.append(("metrics.listen", _fmt(config.metrics.listen)))
    out.append(("metrics.textfile", _fmt(config.metrics.textfile)))
    out.append(("hf_token", _fmt(_secret(config.hf_token))))
    return out


def text(config: Config, price_text: PriceText | None = None) -> str:
    return "\n".join(f"{k} = {v}" for k, v in lines(config, price_text))


_SECRET_LIKE = ("key", "token", "secret", "password", "passwd", "credential")


def _mask_secret_like(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: (MASK if any(w in k.lower() for w in _SECRET_LIKE) else _mask_secret_like(x))
                for k, x in v.items()}
    return v


def _training_data(config: Config) -> dict[str, Any] | None:
    if config.training is None:
        return None
    d = asdict(config.training)
    d["axolotl_extra"] = _mask_secret_like(d["axolotl_extra"])
    return d


def data(config: Config, price_text: PriceText | None = None) -> dict[str, Any]:
    """The same facts as one JSON-ready dict, secrets masked."""
    def plain(obj: Any, **override: Any) -> dict[str, Any]:
        d = asdict(obj)
        d.update(override)
        return d

    return {
        "project": {"name": config.project.name},
        "topics": [asdict(t) for t in config.topics],
        "providers": {n: {"protocol": p.protocol, "dialect": p.dialect, "dialect_guessed": p.dialect_guessed,
                          "base_url": show_url(p.base_url), "api_key": _secret(p.api_key),
                          **({"serve": {**asdict(p.serve), "engine_args": dict(p.serve.engine_args),
                                        "per_replica": p.serve.per_replica, "summary": serve_text(p.serve)}}
                             if p.serve is not None else {}),
                          **{k: getattr(p, k) for k in LIMIT_KEYS if getattr(p, k) is not None}}
                      for n, p in config.providers.items()},
        "roles": {n: (asdict(r) if r is not None else None)
                  for n, r in (("generator", config.roles.generator), ("parent", config.roles.parent),
                               ("embedder", config.roles.embedder), ("judge", config.roles.judge),
                               ("grader", config.roles.grader))},
        "prices": {n: price_text(config.providers[r.provider], r, f"roles.{n}")
                   for n, r in config.roles.all() if r.provider in config.providers and price_text is not None},
        "pipeline": asdict(config.pipeline),
        "gate": asdict(config.gate),
        "training": _training_data(config),
        "targets": {n: plain(t, summary=target_text(t)) for n, t in config.targets.items()},
        "runpod": {"api_key": _secret(config.runpod.api_key),
                   "base_url": show_url(config.runpod.base_url) or DEFAULT_RUNPOD_BASE_URL,
                   "proxy_url": config.runpod.proxy},
        "export": asdict(config.export),
        "hub": plain(config.hub, base_url=show_url(config.hub.base_url) or DEFAULT_HUB_BASE_URL),
        "compare": asdict(config.compare),
        "metrics": asdict(config.metrics),
        "hf_token": _secret(config.hf_token),
        "warnings": list(config.warnings),
    }
