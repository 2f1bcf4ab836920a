"""What a model card may name (the allowlist's rules, used by card_facts.py and card_toml.py): a Hub
model ID as it is, a local path cut to its last component, and no setting whose key could carry a
secret, a host or a path."""

from __future__ import annotations

import os
import re
from pathlib import Path

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# axolotl_extra keys and values that could carry a secret, a host or a path are left out.
_SECRETISH = re.compile(r"token|key|secret|passw|auth|cred|url|host|endpoint|path|dir|wandb|mlflow|hub|push",
                        re.IGNORECASE)


def is_hub_id(name: str | None) -> bool:
    return bool(name) and bool(_HUB_ID.match(name or "")) and not os.path.exists(name or "")


def model_name(name: str | None) -> str | None:
    """A Hub ID as it is; a local path cut to its last component."""
    if not name:
        return None
    if is_hub_id(name):
        return name
    return Path(name.rstrip("/\\")).name or None


def secretish(key: str) -> bool:
    return bool(_SECRETISH.search(key))
