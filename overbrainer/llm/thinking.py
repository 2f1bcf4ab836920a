"""Anthropic thinking: `adaptive`, or `enabled` with `budget_tokens`, chosen by model family.

From the Messages API reference (extended thinking and adaptive thinking pages):

- Claude 4.7 and later think adaptively only: `enabled` is refused with a 400
  (`"thinking.type.enabled" is not supported for this model…`);
- Claude 4.6 (Opus, Sonnet) takes both (`enabled` is deprecated there);
- Claude 3.7 Sonnet to 4.5 think with a fixed budget only: `adaptive` is refused with a 400
  (`adaptive thinking is not supported on this model`);
- older Claude models do not think at all.

A model whose name has no version (an alias, a preview, a proxy's own name) is not judged: it gets
`enabled` when a budget is set, else `adaptive`, and the API decides. `[roles.<r>] thinking`
overrides the choice; a choice the reference refuses for a known family is a configuration error.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

# The protocols serve annotations only: `config check` imports this module (start-up time).
if TYPE_CHECKING:  # pragma: no cover
    from overbrainer.llm.settings import RoleSettings


ADAPTIVE = "adaptive"
ENABLED = "enabled"
MODES = (ADAPTIVE, ENABLED)

_SPLIT = r"[-_@:\[\]]"  # compiled on first use (re's cache): only Claude models need it


def version(model: str) -> tuple[int, int] | None:
    """(major, minor) of a Claude model id (`claude-opus-4-6`, `claude-3-7-sonnet-20250219`,
    `anthropic/claude-sonnet-4.5`); None when the name carries no version."""
    name = model.lower().rsplit("/", 1)[-1].replace(".", "-")
    if "claude" not in name:
        return None
    numbers = [t for t in re.split(_SPLIT, name) if t.isdigit() and len(t) <= 2]  # a date is not a version
    if not numbers:
        return None
    return int(numbers[0]), int(numbers[1]) if len(numbers) > 1 else 0


def supported(model: str) -> frozenset[str] | None:
    """The thinking modes the model's family takes; None when the family is not known."""
    v = version(model)
    if v is None:
        return None
    if v >= (4, 7):
        return frozenset({ADAPTIVE})
    if v == (4, 6):
        return frozenset({ADAPTIVE, ENABLED})
    if v >= (3, 7):
        return frozenset({ENABLED})
    return frozenset()


def thinks(role: RoleSettings) -> bool:
    return role.reasoning and role.reasoning_effort != "none"


def mode(role: RoleSettings) -> str | None:
    """The thinking the role's requests ask for: `adaptive`, `enabled` or None (no thinking)."""
    if not thinks(role):
        return None
    chosen = role.thinking
    if chosen in MODES:
        return chosen
    can = supported(role.model)
    if can is not None and len(can) == 1:
        return next(iter(can))
    return ENABLED if role.thinking_budget is not None else ADAPTIVE


def problems(where: str, role: RoleSettings) -> list[str]:
    """What the reference refuses in this role's thinking (`where` = `roles.<name>`)."""
    if not thinks(role):
        return []
    model = role.model
    budget = role.thinking_budget
    chosen = role.thinking
    can = supported(model)
    m = mode(role)
    if can is not None and not can:
        return [f"{where}.reasoning: {model} has no extended thinking (it came with Claude 3.7 Sonnet)"]
    if can is not None and m not in can:
        if chosen == ADAPTIVE:
            return [f'{where}.thinking: {model} has no adaptive thinking (it came with Claude 4.6); '
                    f'use "enabled" with {where}.thinking_budget']
        if chosen == ENABLED:
            return [f'{where}.thinking: {model} refuses "enabled" (Claude 4.7 and later think adaptively only)']
    if m == ENABLED and budget is None:
        if chosen == ENABLED:
            return [f'{where}.thinking: "enabled" needs {where}.thinking_budget']
        instead = " instead of reasoning_effort" if role.reasoning_effort else ""
        return [f"{where}: {model} thinks only with a fixed budget (adaptive thinking came with "
                f"Claude 4.6): set {where}.thinking_budget{instead}"]
    if m == ADAPTIVE and budget is not None:
        if chosen == ADAPTIVE:
            return [f'{where}.thinking_budget: not used with thinking = "adaptive"']
        return [f"{where}.thinking_budget: {model} refuses a fixed thinking budget (Claude 4.7 and later "
                f"think adaptively only); remove it (reasoning_effort sets how hard it thinks)"]
    return []
