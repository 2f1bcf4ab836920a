"""The subset of JSON Schema the gate checks an answer against (`[gate] json_schema`), without
a dependency: `type` (a name or a list of names: object, array, string, number, integer,
boolean, null), `enum`, `const`, `properties`, `required`, `additionalProperties` (a boolean or
a schema), `items` (one schema), `minItems`, `maxItems`, `minLength`, `maxLength`, `pattern`
(Python `re`, searched), `minimum`, `maximum`, and the annotations `title`, `description`,
`$schema`. Any other keyword is a configuration error (`schema_problems`): a schema is never
half checked. The answer is parsed as JSON by gate_rules.parse_answer (json is not imported
here: `config check` checks a configured schema with this module)."""

from __future__ import annotations

import re
from typing import Any

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_ANNOTATIONS = ("title", "description", "$schema")
_KEYWORDS = ("type", "enum", "const", "properties", "required", "additionalProperties", "items", "minItems",
             "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum") + _ANNOTATIONS
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")


def schema_problems(schema: Any, where: str = "") -> list[str]:
    """What makes `schema` unusable here (an unsupported keyword, a wrong value), naming the
    path inside it; [] when it is usable."""
    if not isinstance(schema, dict):
        return [f"{where or 'the schema'}: expected a table"]
    out = []
    for key, value in schema.items():
        at = f"{where}.{key}" if where else key
        if key not in _KEYWORDS:
            out.append(f"{at}: unsupported keyword (supported: {', '.join(_KEYWORDS)})")
        elif key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or any(n not in TYPES for n in names):
                out.append(f"{at}: expected one of {', '.join(TYPES)} or a list of them")
        elif key in ("properties",):
            if not isinstance(value, dict):
                out.append(f"{at}: expected a table of schemas")
            else:
                for name, sub in value.items():
                    out += schema_problems(sub, f"{at}.{name}")
        elif key in ("items",) or (key == "additionalProperties" and not isinstance(value, bool)):
            out += schema_problems(value, at)
        elif key == "required" and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            out.append(f"{at}: expected a list of names")
        elif key == "enum" and not isinstance(value, list):
            out.append(f"{at}: expected a list")
        elif key in _COUNTS and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            out.append(f"{at}: expected a non-negative integer")
        elif key in ("minimum", "maximum") and (isinstance(value, bool) or not isinstance(value, (int, float))):
            out.append(f"{at}: expected a number")
        elif key == "pattern":
            out += _pattern_problems(value, at)
    return out


def _pattern_problems(value: Any, at: str) -> list[str]:
    if not isinstance(value, str):
        return [f"{at}: expected a string"]
    try:
        re.compile(value)
    except re.error as e:
        return [f"{at}: not a valid regular expression ({e})"]
    return []


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    return isinstance(value, kinds[name])


def violation(value: Any, schema: dict, where: str = "$") -> str | None:
    """The first way `value` breaks `schema` (a usable one: schema_problems is []), or None."""
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, n) for n in names):
            return f"{where}: not of type {' or '.join(names)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: not one of the enum's values"
    if "const" in schema and value != schema["const"]:
        return f"{where}: not the const value"
    if isinstance(value, dict):
        return _object_violation(value, schema, where)
    if isinstance(value, list):
        return _array_violation(value, schema, where)
    if isinstance(value, str):
        return _string_violation(value, schema, where)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: above the maximum {schema['maximum']}"
    return None


def _object_violation(value: dict, schema: dict, where: str) -> str | None:
    for name in schema.get("required", []):
        if name not in value:
            return f"{where}: missing property `{name}`"
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            found = violation(item, properties[name], f"{where}.{name}")
        elif extra is False:
            found = f"{where}: property `{name}` is not allowed"
        elif isinstance(extra, dict):
            found = violation(item, extra, f"{where}.{name}")
        else:
            found = None
        if found:
            return found
    return None


def _size_violation(size: int, schema: dict, low: str, high: str, unit: str, where: str) -> str | None:
    if size < schema.get(low, 0):
        return f"{where}: fewer than {schema[low]} {unit}"
    if high in schema and size > schema[high]:
        return f"{where}: more than {schema[high]} {unit}"
    return None


def _array_violation(value: list, schema: dict, where: str) -> str | None:
    found = _size_violation(len(value), schema, "minItems", "maxItems", "items", where)
    if found is not None:
        return found
    if "items" in schema:
        for i, item in enumerate(value):
            found = violation(item, schema["items"], f"{where}[{i}]")
            if found:
                return found
    return None


def _string_violation(value: str, schema: dict, where: str) -> str | None:
    found = _size_violation(len(value), schema, "minLength", "maxLength", "characters", where)
    if found is not None:
        return found
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        return f"{where}: does not match the pattern"
    return None
