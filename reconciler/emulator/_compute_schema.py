"""Refuse a Compute Engine request body the real API would refuse for its shape: a field name
its message does not have, a value of the wrong JSON kind, an enum value it does not know.

The names come from ``_compute_fields`` (generated from the google-cloud-compute SDK), one
string per message: ``name`` a string, ``name?`` a bool, ``name#`` an integer (a number or
a decimal string, as JSON carries int64), ``name%`` a number, ``name{}`` a map of strings,
``name:Message`` a message, ``name=A|B`` an enum; ``*`` before a name: repeated. The words
follow Google's JSON front end (``Invalid JSON payload received. Unknown name "x" at
'instance_resource': Cannot find field.``) [V form, as the TPU side serves it] and Compute
Engine's own validation for enum values [I].

Pure: no I/O.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from reconciler.emulator._compute_errors import ComputeError, bad_field, invalid
from reconciler.emulator._compute_fields import MESSAGES

_FIELD = re.compile(r"^(\*?)([A-Za-z0-9]+)(\?|#|%|\{\}|:[A-Za-z0-9]+|=[A-Z0-9_|]+)?$")


@dataclass(frozen=True, slots=True)
class Field:
    repeated: bool
    kind: str  # "string" | "bool" | "int" | "number" | "map" | "message" | "enum"
    message: str | None = None
    values: frozenset[str] = frozenset()


@functools.cache
def fields(message: str) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for token in MESSAGES[message].split():
        m = _FIELD.match(token)
        assert m is not None, token
        star, name, tail = m.group(1), m.group(2), m.group(3) or ""
        repeated = star == "*"
        if tail.startswith(":"):
            out[name] = Field(repeated, "message", tail[1:])
        elif tail.startswith("="):
            out[name] = Field(repeated, "enum", values=frozenset(tail[1:].split("|")))
        else:
            kind = {"?": "bool", "#": "int", "%": "number", "{}": "map"}.get(tail, "string")
            out[name] = Field(repeated, kind)
    return out


def snake(name: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", name).lower()


def check(body: Any, message: str, where: str) -> None:
    """Raise ``ComputeError`` (400) when ``body`` is not a valid JSON ``message``; ``where``
    names the request field it came in (``instance_resource``)."""
    _message(body, message, where, "resource")


def _message(value: Any, message: str, where: str, resource: str) -> None:
    if not isinstance(value, dict):
        raise _wrong(where, f"type.googleapis.com/google.cloud.compute.v1.{message}", value)
    known = fields(message)
    for key, item in value.items():
        spec = known.get(key)
        if spec is None:
            raise invalid(
                f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': "
                "Cannot find field."
            )
        if item is None:
            continue
        path, res = f"{where}.{snake(key)}", f"{resource}.{key}"
        if spec.repeated:
            if not isinstance(item, list):
                raise _wrong(path, "a list", item)
            for index, element in enumerate(item):
                _value(element, spec, f"{path}[{index}]", f"{res}[{index}]")
        else:
            _value(item, spec, path, res)


def _value(value: Any, spec: Field, path: str, resource: str) -> None:
    if spec.kind == "message":
        assert spec.message is not None
        _message(value, spec.message, path, resource)
    elif spec.kind == "enum":
        if not isinstance(value, str) or value not in spec.values:
            raise bad_field(resource, value, "Must be one of " + ", ".join(sorted(spec.values)))
    elif spec.kind == "map":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise _wrong(path, "map<string, string>", value)
    elif spec.kind == "bool":
        if not isinstance(value, bool):
            raise _wrong(path, "TYPE_BOOL", value)
    elif spec.kind == "int":
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, str) and re.fullmatch(r"-?\d+", value))
        ):
            raise _wrong(path, "TYPE_INT64", value)
    elif spec.kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _wrong(path, "TYPE_DOUBLE", value)
    elif not isinstance(value, str):
        raise _wrong(path, "TYPE_STRING", value)


def _wrong(path: str, kind: str, value: Any) -> ComputeError:
    return invalid(f"Invalid value at '{path}' ({kind}), {json.dumps(value)}")
