"""JSON text for humans: ``indented(value)`` is ``json.dumps(value, indent=2)``, the same text.

In CPython 3.11 the C encoder cannot indent, so ``json.dumps(..., indent=2)`` runs the
pure-Python one, a generator per container and a ``yield`` per token: printing a 1,000-slot
status document took longer than reading, decoding and checking it (192 M instructions). This
writes the same text with one list of parts, the C string escaper and a call per container.

Pure: no I/O. Exactly ``json.dumps(value, indent=2)`` for every value it accepts: containers
are dicts with str keys, lists and tuples; scalars are str, int, bool and None (exact types);
anything else (a float, a subclass, another key type, an object ``json`` refuses) is handed to
``json.dumps`` itself at its depth. Unlike ``json.dumps`` it does not detect a container that
contains itself (a RecursionError instead of a ValueError): documents are trees.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _string
from typing import Any


def indented(value: Any) -> str:
    """``json.dumps(value, indent=2)``."""
    parts: list[str] = []
    _write(value, "\n", parts)
    return "".join(parts)


def _write(value: Any, newline: str, out: list[str]) -> None:
    """Append ``value``'s text, its lines after the first starting with ``newline``."""
    kind = type(value)
    if kind is str:
        out.append(_string(value))
    elif value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is dict and value:
        mark = len(out)
        try:
            _write_items(value, newline, out)
        except TypeError:  # a key json turns into a string (or refuses): json decides
            del out[mark:]
            _write_json(value, newline, out)
    elif (kind is list or kind is tuple) and value:
        inner = newline + "  "
        lead = "[" + inner
        for item in value:
            kind = type(item)
            if kind is str:
                out.append(lead + _string(item))
            else:
                out.append(lead)
                _write(item, inner, out)
            lead = "," + inner
        out.append(newline + "]")
    else:
        _write_json(value, newline, out)


def _write_items(value: dict[Any, Any], newline: str, out: list[str]) -> None:
    """A non-empty dict's items; TypeError on a key that is not a str (before any output)."""
    inner = newline + "  "
    lead = "{" + inner
    for key, item in value.items():
        kind = type(item)
        # the usual values inline: one f-string each, no call
        if kind is str:
            out.append(f"{lead}{_string(key)}: {_string(item)}")
        elif item is None:
            out.append(f"{lead}{_string(key)}: null")
        elif kind is bool:
            out.append(f"{lead}{_string(key)}: {'true' if item else 'false'}")
        elif kind is int:
            out.append(f"{lead}{_string(key)}: {int.__repr__(item)}")
        else:
            out.append(f"{lead}{_string(key)}: ")
            _write(item, inner, out)
        lead = "," + inner
    out.append(newline + "}")


def _write_json(value: Any, newline: str, out: list[str]) -> None:
    """json.dumps's own text, re-indented (strings are escaped: each "\n" is a line break)."""
    out.append(json.dumps(value, indent=2).replace("\n", newline))
