"""`[gate] json_schema`: the JSON Schema an answer must match, checked by jsonschema (the `gate`
extra, `pip install 'overbrainer[gate]'`; imported only when a schema is set: it is heavy).

The schema's draft is the one its `$schema` names, 2020-12 when it names none; `format` is
checked for the formats jsonschema checks by itself. `schema_problems` checks the schema when the
configuration is read (so a bad one stops a command before it spends): against its draft's
metaschema, and, for 2020-12, for keywords no vocabulary defines (JSON Schema would ignore a
misspelt `requried`: here it is an error, a schema is never half checked). `Schema(schema)
.violation(value)` names the first way an answer breaks it (jsonschema's best match) by its place
in the answer (`$.steps[1]`) and the rule broken, never with the whole answer in it. The answer is
parsed as JSON by gate_rules.parse_answer.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from overbrainer.errors import ConfigError

GATE_HINT = "pip install 'overbrainer[gate]'"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# The 2020-12 metaschema, extended the way the specification extends one: its subschemas are
# reached through `$dynamicRef: "#meta"`, which lands here, so every level refuses what no
# vocabulary evaluated (an unknown keyword).
_STRICT = {"$schema": DRAFT_2020_12, "$id": "urn:overbrainer:gate-json-schema", "$dynamicAnchor": "meta",
           "$ref": DRAFT_2020_12, "unevaluatedProperties": False}
_UNEXPECTED = re.compile(r"\((.*) (?:was|were) unexpected\)")
_LONGEST = 120  # characters of jsonschema's own message (it quotes the value) before a short one


def load_jsonschema() -> Any:
    """The jsonschema package; a ConfigError (exit 2) with the install line when missing."""
    try:
        # lazy: jsonschema (the gate extra, heavy) only when [gate] json_schema is set
        import jsonschema
    except ImportError:
        raise ConfigError(f"[gate] json_schema needs jsonschema: {GATE_HINT}") from None
    return jsonschema


def _at(error: Any, text: str) -> str:
    """`text` after the error's place in the schema (`properties.a.type: …`; at the root, alone)."""
    where = error.json_path.removeprefix("$").removeprefix(".")
    return f"{where}: {text}" if where else text


def _unexpected(error: Any) -> str:
    """The names an unevaluated-properties error lists (`'a', 'b'`)."""
    found = _UNEXPECTED.search(error.message)
    return found.group(1) if found else "?"


def schema_problems(schema: Any) -> list[str]:
    """What makes `schema` unusable, each naming its place in the schema (or that jsonschema is
    not installed); [] when it is usable."""
    if not isinstance(schema, dict):
        return ["expected a table"]
    try:
        js = load_jsonschema()
    except ConfigError:
        return [f"needs jsonschema: {GATE_HINT}"]
    cls = js.validators.validator_for(schema, default=js.Draft202012Validator)
    try:
        cls.check_schema(schema)  # against the draft's metaschema, formats (a pattern's regex) included
    except js.exceptions.SchemaError as e:
        return [_at(e, e.message)]
    if cls is not js.Draft202012Validator:
        return []
    strict = js.Draft202012Validator(_STRICT)
    unknown = [e for e in strict.iter_errors(schema) if e.validator == "unevaluatedProperties"]
    # A subschema with an unknown keyword also fails the keyword that holds it: keep the deepest.
    paths = [tuple(e.absolute_path) for e in unknown]
    deepest = [e for e, p in zip(unknown, paths) if not any(len(o) > len(p) and o[:len(p)] == p for o in paths)]
    return [_at(e, f"unknown keyword {_unexpected(e)}") for e in sorted(deepest, key=lambda e: e.json_path)]


def _extra(error: Any) -> str:
    schema, known = error.schema, error.schema.get("properties", {})
    extra = next(k for k in error.instance if k not in known
                 and not any(re.search(p, k) for p in schema.get("patternProperties", {})))
    return f"property `{extra}` is not allowed"


def _missing(error: Any) -> str:
    return f"missing property `{next(n for n in error.validator_value if n not in error.instance)}`"


def _type(error: Any) -> str:
    names = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    return f"not of type {' or '.join(names)}"


# What each keyword's failure says (jsonschema's own messages quote the value, which may be the
# whole answer); another keyword's says jsonschema's message when short, else the keyword.
_SAY: dict[str, Callable[[Any], str]] = {
    "type": _type,
    "required": _missing,
    "additionalProperties": _extra,
    "enum": lambda e: "not one of the enum's values",
    "const": lambda e: "not the const value",
    "minimum": lambda e: f"below the minimum {e.validator_value}",
    "maximum": lambda e: f"above the maximum {e.validator_value}",
    "exclusiveMinimum": lambda e: f"not above {e.validator_value}",
    "exclusiveMaximum": lambda e: f"not below {e.validator_value}",
    "minLength": lambda e: f"fewer than {e.validator_value} characters",
    "maxLength": lambda e: f"more than {e.validator_value} characters",
    "minItems": lambda e: f"fewer than {e.validator_value} items",
    "maxItems": lambda e: f"more than {e.validator_value} items",
    "minProperties": lambda e: f"fewer than {e.validator_value} properties",
    "maxProperties": lambda e: f"more than {e.validator_value} properties",
    "pattern": lambda e: "does not match the pattern",
}


class Schema:
    """A usable schema (schema_problems is []), its validator built once."""

    def __init__(self, schema: dict[str, Any]):
        js = load_jsonschema()
        cls = js.validators.validator_for(schema, default=js.Draft202012Validator)
        self._best_match = js.exceptions.best_match
        self._validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def violation(self, value: Any) -> str | None:
        """The first way `value` breaks the schema, as `$.steps[1]: below the minimum 1`; or None."""
        error = self._best_match(self._validator.iter_errors(value))
        if error is None:
            return None
        say = _SAY.get(error.validator)
        text = say(error) if say is not None else (
            error.message if len(error.message) <= _LONGEST else f"fails `{error.validator}`")
        return f"{error.json_path}: {text}"
