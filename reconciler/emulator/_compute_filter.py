"""The ``filter`` of Compute Engine list calls, the part clients use [V: the operators, from
the API reference's ``filter`` parameter; I: what is left out].

    FIELD = VALUE | FIELD != VALUE | FIELD : VALUE     literal equality / inequality /
                                                       substring (``*`` is a wildcard)
    FIELD eq REGEX | FIELD ne REGEX                    RE2 full match (the older syntax)
    (EXPR) AND (EXPR), (EXPR) OR (EXPR), (EXPR) (EXPR)  grouping; juxtaposition is AND

``FIELD`` is a dotted path into the resource's JSON (``labels.owner``, ``status``, ``name``,
``operationType``); a path that does not exist matches nothing but ``!=`` / ``ne``.
Anything else is refused with 400 ``Invalid list filter expression.``, never ignored.

Pure: no I/O.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Any

from reconciler.emulator._compute_errors import bad_field

Predicate = Callable[[dict[str, Any]], bool]
_TOKEN = re.compile(
    r'\s*(?:(?P<paren>[()])|(?P<op>!=|=|:|\beq\b|\bne\b)|"(?P<quoted>(?:[^"\\]|\\.)*)"'
    r"|(?P<word>[^\s()=!:\"]+))"
)


def compile_filter(text: str | None) -> Predicate:
    """A predicate for ``text``; an empty filter matches everything."""
    if not text or not text.strip():
        return lambda _: True
    tokens = _tokens(text)
    predicate, rest = _expression(tokens, text)
    if rest:
        raise _refused(text)
    return predicate


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _refused(text)
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value)
        out.append((kind, value))
        pos = m.end()
    return out


def _expression(
    tokens: list[tuple[str, str]], text: str
) -> tuple[Predicate, list[tuple[str, str]]]:
    left, tokens = _term(tokens, text)
    while tokens and tokens[0] != ("paren", ")"):
        joiner = "AND"
        if tokens[0][0] == "word" and tokens[0][1].upper() in ("AND", "OR"):
            joiner = tokens[0][1].upper()
            tokens = tokens[1:]
        right, tokens = _term(tokens, text)
        left = _join(left, right, joiner)
    return left, tokens


def _join(left: Predicate, right: Predicate, joiner: str) -> Predicate:
    if joiner == "OR":
        return lambda r: left(r) or right(r)
    return lambda r: left(r) and right(r)


def _term(tokens: list[tuple[str, str]], text: str) -> tuple[Predicate, list[tuple[str, str]]]:
    if not tokens:
        raise _refused(text)
    if tokens[0] == ("paren", "("):
        inner, rest = _expression(tokens[1:], text)
        if not rest or rest[0] != ("paren", ")"):
            raise _refused(text)
        return inner, rest[1:]
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "op":
        raise _refused(text)
    if tokens[2][0] not in ("word", "quoted"):
        raise _refused(text)
    path, op, value = tokens[0][1].split("."), tokens[1][1], tokens[2][1]
    if op in ("eq", "ne"):
        try:
            pattern = re.compile(value)
        except re.error:
            raise _refused(text) from None
        return _compare(path, op == "ne", lambda s: bool(pattern.fullmatch(s))), tokens[3:]
    if op == ":":
        return _compare(path, False, lambda s: fnmatch.fnmatchcase(s, f"*{value}*")), tokens[3:]
    return _compare(path, op == "!=", lambda s: fnmatch.fnmatchcase(s, value)), tokens[3:]


def _compare(path: list[str], negate: bool, test: Callable[[str], bool]) -> Predicate:
    def predicate(resource: dict[str, Any]) -> bool:
        value: Any = resource
        for part in path:
            if not isinstance(value, dict) or part not in value:
                return negate
            value = value[part]
        text = str(value).lower() if isinstance(value, bool) else str(value)
        return test(text) != negate

    return predicate


def _refused(text: str) -> Exception:
    return bad_field("filter", text, "Invalid list filter expression.")
