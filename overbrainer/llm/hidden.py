"""Which parents hide their raw reasoning."""

from __future__ import annotations


def hides(protocol: str, model: str) -> bool:
    """True when the provider/model never shows raw thoughts (only summaries or nothing)."""
    if protocol == "anthropic":
        return True
    model = model.lower()
    name = model.rsplit("/", 1)[-1]
    if name.startswith("gpt-oss"):
        return False
    if model.startswith(("openai/", "anthropic/")):
        return True
    if name.startswith(("gpt-", "claude", "gemini")):
        return True
    return len(name) > 1 and name[0] == "o" and name[1].isdigit()
