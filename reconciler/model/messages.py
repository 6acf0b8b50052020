"""The loader's problems in the project's own words, never the YAML library's or pydantic's.

``yaml_problem`` turns a YAML syntax error (its problem text, context and the text around the
position) into a sentence that says what to fix: a tab indent, a stray ``:``, an indentation
that does not match, an unclosed bracket or quote, a duplicate key. ``schema_problem`` does the
same for one schema error: an enum value with its choices and a "did you mean", a wrong type,
a number out of range, a missing or unknown key. Pure: values in, text out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

#: Schema errors raised by the model's own validators: their text is already ours.
OWN_KINDS: Final = frozenset(
    {
        "invalid_name",
        "catalogue",
        "duration",
        "instant",
        "family",
        "text",
        "socket",
        "command",
        "env",
        "url",
    }
)


def shown(value: Any) -> str:
    """A value as the user wrote it in YAML: ``'two'``, ``3``, ``true``, ``nothing``."""
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def choices_text(choices: Sequence[str]) -> str:
    """``held or released``; ``one of spot, on-demand or reserved``."""
    if len(choices) == 1:
        return choices[0]
    if len(choices) == 2:
        return f"{choices[0]} or {choices[1]}"
    return "one of " + ", ".join(choices[:-1]) + f" or {choices[-1]}"


def did_you_mean(word: str, vocabulary: Sequence[str]) -> str | None:
    """The word of ``vocabulary`` closest to ``word`` (ignoring case and ``-``/``_``), if any."""
    folded = {re.sub(r"[-_ ]", "", v.lower()): v for v in vocabulary}
    key = re.sub(r"[-_ ]", "", word.lower())
    if key in folded:
        return folded[key]
    close = difflib.get_close_matches(word.lower(), [v.lower() for v in vocabulary], n=1)
    if not close:
        return None
    return next(v for v in vocabulary if v.lower() == close[0])


def _literal_choices(err: Mapping[str, Any]) -> list[str]:
    expected = str((err.get("ctx") or {}).get("expected", ""))
    return re.findall(r"'([^']*)'", expected)


def schema_problem(err: Mapping[str, Any], label: str) -> str:
    """One pydantic error (``type``, ``loc``, ``msg``, ``input``, ``ctx``) as a sentence about
    the key ``label`` (e.g. ``mode``, ``accelerators.v4-8``)."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    got = f"; got {shown(value)}"
    if kind == "missing":
        return f"missing required key {label!r}"
    if kind == "extra_forbidden":
        return f"unknown key {label!r}"
    if kind == "literal_error":
        choices = _literal_choices(err)
        hint = ""
        if isinstance(value, str) and (near := did_you_mean(value, choices)) is not None:
            hint = f" (did you mean {near!r}?)"
        return f"{label} must be {choices_text(choices)}{got}{hint}"
    if kind in {"bool_parsing", "bool_type"}:
        return f"{label} must be true or false{got}"
    if kind in {"int_parsing", "int_type", "int_from_float"}:
        return f"{label} must be a whole number{got}"
    if kind in {"float_parsing", "float_type"}:
        return f"{label} must be a number{got}"
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "less_than_equal": ("at most", "le"),
        "greater_than": ("more than", "gt"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, name = bounds[kind]
        return f"{label} must be {words} {ctx.get(name)}{got}"
    if kind == "string_type":
        quote = " (put it in quotes)" if isinstance(value, int | float) else ""
        return f"{label} must be a string{got}{quote}"
    if kind == "list_type":
        return f"{label} must be a list{got}"
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return f"{label} must be a mapping of keys to values{got}"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return f"{label} needs at least {least} {'entry' if least == 1 else 'entries'}"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if kind in {"invalid_name", "catalogue"}:
        return msg  # names the value and the rule itself
    return f"{label}: {msg}"


# --- YAML syntax -----------------------------------------------------------------------------


def yaml_problem(
    problem: str, context: str, text: str, line: int, col: int, context_line: int | None
) -> str:
    """A YAML syntax error at 1-based ``line``:``col`` of ``text`` as a sentence. ``problem``
    and ``context`` are the parser's own words, used only to recognise the case."""
    if "'\\t'" in problem:
        row = text.split("\n")[line - 1] if 0 < line <= text.count("\n") + 1 else ""
        if not row[: max(col - 1, 0)].strip(" \t"):
            return "tabs are not allowed for indentation in YAML; use spaces"
        return "a tab is not allowed here in YAML; use spaces"
    if m := re.match(r'found duplicate key "(.*)" with value', problem):
        return f"duplicate key {m.group(1)!r}: a key may appear only once in a mapping"
    if problem == "mapping values are not allowed here":
        return (
            "unexpected ':' here: quote a value that contains ': ', and check that the line "
            "above has its ':'"
        )
    where = f" (the block starts at line {context_line})" if context_line else ""
    if problem.startswith("expected <block end>"):
        return f"this line's indentation does not match the lines above{where}"
    if m := re.match(r"expected ',' or '([\]}])', but got", problem):
        opener = "[" if m.group(1) == "]" else "{"
        found = f" opened at line {context_line}" if context_line else ""
        if "<stream end>" in problem:
            return f"the file ends before the '{opener}'{found} is closed with '{m.group(1)}'"
        return f"expected ',' or '{m.group(1)}' to continue the '{opener}'{found}"
    if "<stream end>" in problem or "end of stream" in problem:
        if "quoted scalar" in context:
            return f"a quoted value that starts at line {context_line} is never closed"
        return "the file ends in the middle of a value (an unclosed '[', '{' or quote?)"
    if m := re.match(r"found undefined alias '(.*)'", problem):
        return f"'*{m.group(1)}' refers to no anchor: define '&{m.group(1)}' before using it"
    return f"not valid YAML here: {problem}"
