"""The merged TOML+env dict → model dataclasses: project, topics, providers, roles, pipeline.

Every problem is appended to `problems` (nothing stops at the first); the sections of the
training area live in build_train.py.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from overbrainer.config import build_train
from overbrainer.config import limits
from overbrainer.config.fields import NAME_RULE, EnvStr, Table, is_name, misnamed, origin, unknown
from overbrainer.config.model import (
    DIALECTS,
    EFFORTS,
    MODES,
    PROTOCOLS,
    ROLE_NAMES,
    THINKING_MODES,
    Benchmark,
    Config,
    Gate,
    Pipeline,
    PriceSetting,
    Project,
    Provider,
    Role,
    Roles,
    Topic,
)
from overbrainer.config.values import secret, url
from overbrainer.dataset.quality.json_schema import schema_problems
from overbrainer.dataset.quality.language import LANGUAGES
from overbrainer.llm.dialects import OPENAI_BATCH, batch_api, guess
from overbrainer.llm.thinking import problems as refused

U32 = 2**32 - 1
U64 = 2**64 - 1
SEED_MAX = 2**63 - 1


def build(data: dict[str, Any], environ: Mapping[str, str], problems: list[str]) -> Config | None:
    """A Config, or None when a problem was found (all of them are in `problems`)."""
    root = Table(data, "", problems)
    project = _project(root)
    topics = _topics(root)
    providers = _providers(root, environ)
    roles = _roles(root, providers, _declared(data, "providers"))
    pipeline = _pipeline(root)
    gate = _gate(root)
    warnings: list[str] = []
    training = build_train.training(root)
    targets = build_train.targets(root, environ, warnings)
    runpod = build_train.runpod(root, environ)
    export = build_train.export(root)
    hub = build_train.hub(root)
    compare = build_train.compare(root)
    metrics = build_train.metrics(root)
    hf_token = secret(root, "hf_token", environ)
    log = root.str("log")
    root.finish()
    if training is not None:
        if training.target not in _declared(data, "targets"):
            problems.append(f"training.target: unknown target `{training.target}`")
        if training.hub_model_id is not None:
            warnings.append("training.hub_model_id is deprecated (Axolotl pushes to that repo itself "
                            "at the end of training)")
    for section, side in (("export", export), ("compare", compare)):
        if side.target is not None and side.target not in _declared(data, "targets"):
            problems.append(f"{section}.target: unknown target `{side.target}`")
    if roles is not None:
        problems.extend(batch_problems(pipeline, roles, providers))
    if problems or project is None or roles is None:
        return None
    return Config(project=project, roles=roles, topics=topics, providers=providers, pipeline=pipeline,
                  gate=gate, training=training, targets=targets, runpod=runpod, export=export, hub=hub,
                  compare=compare, metrics=metrics, hf_token=hf_token, log=log, warnings=warnings)


def _project(root: Table) -> Project | None:
    t = root.table("project", required=True)
    if t is None:
        return None
    name = t.str("name", required=True, nonempty=True)
    t.finish()
    return Project(name) if name is not None else None


def _topics(root: Table) -> list[Topic]:
    raw = root.raw("topics", [])
    if isinstance(raw, dict) and origin(raw):
        unknown(root.problems, "topics", raw)  # topics cannot come from the environment
        return []
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        root.problem("topics", "expected an array of tables ([[topics]])")
        return []
    if len(raw) > limits.MAX_TOPICS:
        root.problem("topics", f"must be at most {limits.MAX_TOPICS} tables ([[topics]])")
        return []
    out: list[Topic] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        t = Table(item, f"topics[{i}]", root.problems)
        name = t.str("name", required=True, nonempty=True)
        if name is not None:
            t.path = f"topics.{name}"
            if name in seen:
                root.problems.append(f"topics: duplicate name `{name}`")
            seen.add(name)
        description = t.str("description")
        subtopics = t.int("subtopics", required=True, min=1, max=limits.MAX_SUBTOPICS)
        per = t.int("questions_per_subtopic", required=True, min=1, max=limits.MAX_QUESTIONS_PER_SUBTOPIC)
        t.finish()
        if name is not None and subtopics is not None and per is not None:
            out.append(Topic(name, description, subtopics, per))
    total = limits.planned_total_problem(out)
    if total is not None:
        root.problems.append(total)
    return out


def _providers(root: Table, environ: Mapping[str, str]) -> dict[str, Provider]:
    out: dict[str, Provider] = {}
    tables = root.tables("providers")
    for name, t in tables.items():
        if not is_name(name):
            root.problems.append(f"providers.{name}: name must match {NAME_RULE}")
        if misnamed(t, name, "provider", [n for n, o in tables.items() if "protocol" in o.data], "protocol"):
            continue
        protocol = t.choice("protocol", PROTOCOLS, required=True)
        base_url = url(t, "base_url")
        api_key = secret(t, "api_key", environ)
        dialect = t.choice("dialect", DIALECTS)
        rpm = t.int("max_requests_per_minute", min=1, max=U32)
        tpm = t.int("max_tokens_per_minute", min=1, max=U32)
        queue = t.int("batch_queue_tokens", min=1, max=2**53)
        price = _price(t)
        t.finish()
        if protocol is None:
            continue
        guessed = False
        if protocol != "openai":
            if dialect is not None:
                t.problem("dialect", "only for an openai provider (the anthropic protocol has none)")
            dialect = None
        elif dialect is None:
            dialect, guessed = guess(base_url), True
        if queue is not None and batch_api(protocol, dialect) != OPENAI_BATCH:
            t.problem("batch_queue_tokens", "only for a provider with OpenAI's batch API (dialect openai)")
        out[name] = Provider(name, protocol, base_url, api_key, dialect, guessed, price, max_requests_per_minute=rpm,
                             max_tokens_per_minute=tpm, batch_queue_tokens=queue)
    return out


PRICE_HELP = "USD per million tokens, 0 or more"
FREE = PriceSetting(0.0, 0.0)


def _price(t: Table) -> PriceSetting | None:
    """`price`: 0 (free: a self-hosted server), or a table of USD per million tokens, `input` and
    `output` required, `cached_input` and `batch_input` with `batch_output` optional."""
    k = "price"
    raw = t.raw(k)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        if _is_zero(raw):
            return FREE
        t.problem(k, "expected 0 (free: a self-hosted server) or a table { input = …, output = … } "
                  f"({PRICE_HELP})", raw)
        return None
    sub = Table(raw, t.key(k), t.problems)
    money = (lambda x: 0 <= x < math.inf, f"must be a number of {PRICE_HELP}")
    values = {name: sub.float(name, required=name in ("input", "output"), rule=money)
              for name in ("input", "output", "cached_input", "batch_input", "batch_output")}
    sub.finish()
    if (values["batch_input"] is None) != (values["batch_output"] is None):
        missing = "batch_output" if values["batch_output"] is None else "batch_input"
        sub.problem(missing, "batch_input and batch_output go together: set both")
        return None
    if values["input"] is None or values["output"] is None:
        return None
    return PriceSetting(**values)


def _is_zero(value: Any) -> bool:
    if isinstance(value, EnvStr):
        return value.strip() in ("0", "0.0")
    return type(value) in (int, float) and value == 0


def _declared(data: dict[str, Any], section: str) -> set[str]:
    v = data.get(section)
    return set(v) if isinstance(v, dict) else set()


def _role(t: Table, name: str, providers: dict[str, Provider], declared: set[str]) -> Role | None:
    provider = t.str("provider", required=True, nonempty=True)
    model = t.str("model", required=True, nonempty=True)
    reasoning = t.bool("reasoning", False)
    max_tokens = t.int("max_tokens", Role.max_tokens, min=1, max=U32)
    temperature = t.float("temperature", rule=(lambda x: 0 <= x <= 2, "must be in [0, 2]"))
    effort = t.choice("reasoning_effort", EFFORTS)
    budget = t.int("thinking_budget", min=0, max=U32)
    mode = t.choice("thinking", THINKING_MODES)
    price = _price(t)
    t.finish()
    problems = t.problems
    p = providers.get(provider) if provider else None
    if provider is not None and provider not in declared:
        problems.append(f"roles.{name}: unknown provider `{provider}`")
    if effort is not None and effort != "none" and not reasoning:
        problems.append(f"roles.{name}.reasoning_effort: requires reasoning = true")
    if temperature is not None and reasoning and p is not None and p.protocol == "anthropic":
        problems.append(f"roles.{name}.temperature: not allowed with reasoning = true on the anthropic protocol")
    if budget is not None:
        if p is not None and p.protocol != "anthropic":
            problems.append(f"roles.{name}.thinking_budget: only for an anthropic provider")
        if not reasoning:
            problems.append(f"roles.{name}.thinking_budget: requires reasoning = true")
        if effort is not None:
            problems.append(f"roles.{name}.thinking_budget: cannot be combined with reasoning_effort")
        if not 1024 <= budget < max_tokens:
            problems.append(f"roles.{name}.thinking_budget: must be at least 1024 and less than max_tokens")
    if mode is not None:
        if p is not None and p.protocol != "anthropic":
            problems.append(f"roles.{name}.thinking: only for an anthropic provider")
        if not reasoning:
            problems.append(f"roles.{name}.thinking: requires reasoning = true")
    if name == "embedder" and p is not None and p.protocol == "anthropic":
        problems.append("roles.embedder: the anthropic protocol has no embeddings, use an openai provider")
    if provider is None or model is None:
        return None
    role = Role(provider, model, reasoning, max_tokens, temperature, effort, budget, mode, price)
    if p is not None and p.protocol == "anthropic" and not problems_before(problems, name):
        problems.extend(refused(f"roles.{name}", role))
    return role


def problems_before(problems: list[str], role_name: str) -> bool:
    """Whether a problem of this role was already found (the family check then stays quiet)."""
    return any(p.startswith((f"roles.{role_name}.", f"roles.{role_name}:")) for p in problems)


def _roles(root: Table, providers: dict[str, Provider], declared: set[str]) -> Roles | None:
    t = root.table("roles", required=True)
    if t is None:
        return None
    found: dict[str, Role | None] = {}
    for name in ROLE_NAMES:
        sub = t.table(name, required=name in ("generator", "parent"))
        found[name] = _role(sub, name, providers, declared) if sub is not None else None
    t.finish()
    if found["generator"] is None or found["parent"] is None:
        return None
    return Roles(found["generator"], found["parent"], found["embedder"], found["judge"], found["grader"])


def _pipeline(root: Table) -> Pipeline:
    t = root.table("pipeline")
    if t is None:
        return Pipeline()
    d = Pipeline()
    unit_open = (lambda x: 0 < x <= 1, "must be in (0, 1]")
    p = Pipeline(
        concurrency=t.int("concurrency", d.concurrency, min=1, max=limits.MAX_CONCURRENCY),
        max_retries=t.int("max_retries", d.max_retries, min=0, max=limits.MAX_RETRIES),
        dedup_threshold=t.float("dedup_threshold", d.dedup_threshold, rule=unit_open),
        embedding_threshold=t.float("embedding_threshold", d.embedding_threshold, rule=unit_open),
        question_batch_size=t.int("question_batch_size", d.question_batch_size, min=1, max=limits.MAX_QUESTION_BATCH),
        request_timeout_secs=t.int("request_timeout_secs", d.request_timeout_secs, min=1, max=U64),
        eval_ratio=t.float("eval_ratio", d.eval_ratio, rule=(lambda x: 0 < x < 1, "must be in (0, 1)")),
        seed=t.int("seed", d.seed, min=0, max=SEED_MAX),
        include_system_prompt=t.bool("include_system_prompt", d.include_system_prompt),
        stop_grace_secs=t.int("stop_grace_secs", d.stop_grace_secs, min=0, max=3600),
        max_cost_usd=t.float("max_cost_usd", rule=(lambda x: 0 < x < math.inf, "must be greater than 0")),
        decontaminate=_benchmarks(t),
        decontaminate_ngram=t.int("decontaminate_ngram", d.decontaminate_ngram, min=1, max=limits.MAX_NGRAM),
        decontaminate_eval=t.bool("decontaminate_eval", d.decontaminate_eval),
        mode=t.choice("mode", MODES, d.mode),
        answers_mode=t.choice("answers_mode", MODES),
    )
    t.finish()
    return p


def batch_problems(pipeline: Pipeline, roles: Roles, providers: dict[str, Provider]) -> list[str]:
    """A stage in batch mode whose role's provider has no batch API (docs/batch.md), named by the
    key that asks for batch mode: found here, before anything is sent."""
    if pipeline.stage_mode("answers") != "batch":
        return []
    key = "pipeline.answers_mode" if pipeline.answers_mode == "batch" else "pipeline.mode"
    provider = providers.get(roles.parent.provider)
    if provider is None or batch_api(provider.protocol, provider.dialect) is not None:
        return []
    return [f"{key}: batch mode needs a provider with a batch API, and roles.parent's provider "
            f"`{provider.name}` ({provider.protocol} protocol, {provider.dialect} dialect) has none: only "
            "OpenAI (dialect openai) and Anthropic (protocol anthropic) have one; set "
            f"{key} = \"online\" or use such a provider"]


def _benchmarks(t: Table) -> tuple[Benchmark, ...]:
    """`decontaminate`: benchmark paths, each a string or a table {path, fields}; from the
    environment, paths separated by commas."""
    key = "decontaminate"
    v = t.raw(key, [])
    if isinstance(v, EnvStr):
        return tuple(Benchmark(p.strip()) for p in v.split(",") if p.strip())
    if not isinstance(v, list):
        t.problem(key, "expected a list of paths (or {path, fields} tables)", v)
        return ()
    out = []
    for i, item in enumerate(v):
        if isinstance(item, dict):
            item_t = Table(item, t.key(f"{key}[{i}]"), t.problems)
            path = item_t.str("path", required=True, nonempty=True)
            fields = item_t.raw("fields", [])
            item_t.finish()
            if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
                item_t.problem("fields", "expected a list of field names", fields)
                continue
            if path is not None:
                out.append(Benchmark(path, tuple(fields)))
        elif isinstance(item, str) and item.strip():
            out.append(Benchmark(item.strip()))
        else:
            t.problem(f"{key}[{i}]", "expected a path (a non-empty string) or a {path, fields} table", item)
    return tuple(out)


def _gate(root: Table) -> Gate:
    t = root.table("gate")
    if t is None:
        return Gate()
    d = Gate()
    g = Gate(
        min_chars=t.int("min_chars", min=0, max=U32), max_chars=t.int("max_chars", min=1, max=U64),
        min_tokens=t.int("min_tokens", min=0, max=U32), max_tokens=t.int("max_tokens", min=1, max=U64),
        language=_language(t),
        format_regex=_regex(t, "format_regex"),
        json_schema=_schema(t, "json_schema"),
        grader_threshold=t.float("grader_threshold", d.grader_threshold,
                                 rule=(lambda x: 0 <= x <= 10, "must be in [0, 10]")),
        stop_after=t.int("stop_after", d.stop_after, min=0, max=limits.MAX_PLANNED_QUESTIONS),
        stop_share=t.float("stop_share", d.stop_share, rule=(lambda x: 0 <= x < 1, "must be in [0, 1)")),
    )
    t.finish()
    for low, high in (("min_chars", "max_chars"), ("min_tokens", "max_tokens")):
        a, b = getattr(g, low), getattr(g, high)
        if a is not None and b is not None and a > b:
            t.problem(low, f"must not be greater than {high}")
    return g


def _language(t: Table) -> str | None:
    if "language" not in t.data:
        return None
    language: str | None = t.choice("language", LANGUAGES)
    return language


def _regex(t: Table, k: str) -> str | None:
    v: str | None = t.str(k, nonempty=True)
    if v is None:
        return None
    try:
        re.compile(v)
    except re.error as e:
        t.problem(k, f"not a valid regular expression ({e})", t.data.get(k))
        return None
    return v


def _schema(t: Table, k: str) -> dict[str, Any] | None:
    v = t.raw(k)
    if v is None:
        return None
    problems = schema_problems(v)
    for p in problems:
        t.problem(k, p, v)
    return None if problems else v
