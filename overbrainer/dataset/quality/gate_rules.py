"""The gate's rule checks (free: no request), in this order: length, language, format.

The answers stage already excludes the empty, truncated and refused answers (`meta.excluded`,
pipeline/answers.classify); these rules come on top, from `[gate]` (config/model.Gate):
`min_chars`/`max_chars` (the answer's characters), `min_tokens`/`max_tokens` (its output
tokens as the provider counted them, reasoning included), `language` (language.py),
`format_regex` (searched in the answer: anchor it with ^ and $ to match the whole) and
`json_schema` (json_schema.py, by jsonschema; the answer is parsed as JSON after trimming
whitespace and one enclosing ```json fence).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..records import Example
from .json_schema import Schema
from .language import language_problem
from .verdicts import answer_text

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```$", re.S)
RULE_KEYS = ("min_chars", "max_chars", "min_tokens", "max_tokens", "language", "format_regex", "json_schema")


class Rules:
    """The configured rules of a `[gate]` (any object with RULE_KEYS attributes, or None)."""

    def __init__(self, gate: Any):
        self.values = {k: getattr(gate, k, None) for k in RULE_KEYS}
        self._regex = re.compile(self.values["format_regex"]) if self.values["format_regex"] else None
        self._schema = Schema(self.values["json_schema"]) if self.values["json_schema"] is not None else None

    @property
    def active(self) -> bool:
        return any(v is not None for v in self.values.values())

    def settings(self) -> dict:
        """What decides the rules' verdicts (its digest is the verdicts' `settings`)."""
        return {"rules": self.values}

    def check(self, ex: Example) -> tuple[str, str] | None:
        """(reason, detail) of the first rule `ex` breaks, or None."""
        text = answer_text(ex)
        v = self.values
        found = _bounds(len(text), v["min_chars"], v["max_chars"], "characters")
        if found is None and ex.meta is not None:
            found = _bounds(ex.meta.output_tokens, v["min_tokens"], v["max_tokens"], "output tokens")
        if found is not None:
            return "length", found
        if v["language"] is not None:
            problem = language_problem(text, v["language"])
            if problem is not None:
                return "language", problem
        return self._format(text)

    def _format(self, text: str) -> tuple[str, str] | None:
        if self._regex is not None and self._regex.search(text) is None:
            return "format", "does not match format_regex"
        if self._schema is not None:
            try:
                value = parse_answer(text)
            except ValueError:
                return "format", "not JSON"
            problem = self._schema.violation(value)
            if problem is not None:
                return "format", f"json_schema: {problem}"
        return None


def parse_answer(text: str) -> Any:
    """The answer's JSON value; ValueError when it is not JSON."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    return json.loads(body)


def _bounds(n: int, low: int | None, high: int | None, unit: str) -> str | None:
    if low is not None and n < low:
        return f"{n} {unit}, fewer than {low}"
    if high is not None and n > high:
        return f"{n} {unit}, more than {high}"
    return None
