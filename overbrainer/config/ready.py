"""Whether a valid configuration can do its work, checked before anything is sent or removed:
it has topics, every provider a role uses has a URL, a parent asked for its reasoning can
return it, and the extras its settings need are installed.

`config check` lists these problems; `run` refuses with the first of no topics and hidden
reasoning, `answers` with hidden reasoning (exit 2), before any stage runs.
"""

from __future__ import annotations

from overbrainer.config.model import Config
from overbrainer.errors import ConfigError
from overbrainer.llm.hidden import hides
from overbrainer.support import extras

# Parents that return their raw reasoning (named in the fix of a parent that hides it).
SHOWS_REASONING = "DeepSeek-R1, Qwen3 or QwQ, gpt-oss, Kimi K2 Thinking, GLM-4.5"


def url_variable(provider: str) -> str:
    return f"OVERBRAINER_PROVIDERS__{provider.upper()}__BASE_URL"


def unset_urls(config: Config) -> list[str]:
    """One problem per provider used by a role whose base_url is not set."""
    used = dict.fromkeys(role.provider for _, role in config.roles.all())
    return [f"providers.{name}.base_url is not set: set {url_variable(name)} (in .env or the shell)"
            for name in used if not config.providers[name].base_url]


NO_TOPICS = ("topics: no [[topics]] table: there is nothing to generate; add one per subject area "
             "([[topics]] with name, subtopics and questions_per_subtopic; `overbrainer init` writes an example)")


def no_topics(config: Config) -> str | None:
    """The problem of a project with no `[[topics]]` (every stage would write nothing), or None."""
    return None if config.topics else NO_TOPICS


def hidden_reasoning(config: Config) -> str | None:
    """The problem of `roles.parent.reasoning = true` with a parent that never returns its raw
    reasoning (every answer would be excluded from training), or None."""
    role = config.roles.parent
    if role is None or not role.reasoning:
        return None
    if not hides(config.providers[role.provider].protocol, role.model):
        return None
    return (f"roles.parent.reasoning = true, but the parent {role.provider}/{role.model} does not return its raw "
            f"reasoning, so every answer would be excluded from training: set roles.parent.reasoning = false "
            f"to distil answers without reasoning, or pick a parent that returns it ({SHOWS_REASONING})")


def missing_extras(config: Config) -> list[str]:
    """One problem per extra a setting needs that is not installed: `[metrics]` (every command that
    takes the project lock serves or writes them) and `[hub] after_training` (`run`, `train`)."""
    wanted = []
    if config.metrics.enabled:
        wanted.append(("metrics", "[metrics]"))
    if config.hub.after_training and config.training is not None:
        wanted.append(("hub", "[hub] after_training"))
    return [extras.needs(what, extra) for extra, what in wanted if not extras.installed(extra)]


def problems(config: Config) -> list[str]:
    found = [p for p in (no_topics(config),) if p] + unset_urls(config)
    reasoning = hidden_reasoning(config)
    return found + ([reasoning] if reasoning else []) + missing_extras(config)


def refuse_unrunnable(config: Config) -> None:
    """ConfigError (exit 2) before `run`'s first stage: no topics, or a parent hiding the
    reasoning asked for."""
    for problem in (no_topics(config), hidden_reasoning(config)):
        if problem is not None:
            raise ConfigError(problem)


def refuse_hidden_reasoning(config: Config) -> None:
    """ConfigError (exit 2) before `answers` or `run` spends anything on answers it would exclude."""
    problem = hidden_reasoning(config)
    if problem is not None:
        raise ConfigError(problem)
