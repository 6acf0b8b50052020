"""The YAML under the loader: text -> plain data, and where each part of it is written.

libyaml (PyYAML's ``CParser``) composes the node tree, which keeps the line and column of every
node; the values are built from it here (``Tree``): dicts, lists, ``str``, ``int``, ``float``,
``bool`` and ``None``, with ``Tree.at`` giving the 1-based ``line:col`` of any key or value.
Edits keep the user's comments through ruamel.yaml's round trip (``intent/roundtrip.py``),
which reads YAML 1.2; so does this module, where PyYAML alone would read YAML 1.1:

- booleans are ``true``/``false`` (any case ruamel takes): ``yes``, ``no``, ``on``, ``off``
  are text; ``017`` is 17 and ``0o17`` is 15; ``1e3`` is a float; ``1:30`` is text (no base
  60); ``_`` between digits is ignored;
- timestamps stay text (``model.times`` parses them where the schema says, so an impossible
  one is reported at its own line); the ``=`` scalar is text;
- a key repeated in one mapping is refused, every repetition at its own place (PyYAML would
  keep the last value without a word), whether written alike or read alike (``1`` and ``1.0``,
  as ruamel compares them; ``1`` and ``'1'``, one key to the schema);
- a ``%YAML`` directive other than ``1.2`` is refused (ruamel would read the file as 1.1);
- ``<<`` merges a mapping (or a list of them) as ruamel does: keys written beside it win, an
  earlier mapping wins over a later one; a merged value's position is where it is written;
- NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR (U+0085, U+2028, U+2029) are ordinary
  characters, as in YAML 1.2 and the user's editor, not line breaks: they are read as
  stand-ins from the Private Use Area and given back in every value, so lines and columns
  count ``\n`` alone;
- a tag is honoured only when it is one of YAML's own for the values above (``!!str``,
  ``!!int``, ...); any other (``!!python/object``, ``!foo``) is refused at its node.

libyaml accepts a tab after ``key:`` that ruamel refuses, and words its errors its own way: a
text with a tab, or one libyaml refuses, is read again by PyYAML's pure-Python parser, whose
errors (problem, context and marks) are ruamel's own, so ``model/messages.yaml_problem`` words
them exactly as before. A file larger than 4 MiB, with a NUL byte, nested too deeply or not
YAML is refused as ``file:line:col: message`` (``refusal``, which words ruamel's errors for
the round trip too).

An anchor or alias name that YAML 1.1 ends at a ``:`` or ``?`` that 1.2 takes into it
(``&a: b``, ``*a: b``) is refused at its place. Left as it is, where the two parsers' grammars
differ (never on a value both read): a plain value starting with ``:`` inside ``[...]`` or
``{...}``, an anchor name with ``:`` inside it, a tab between the items of ``{...}`` or
``[...]`` and a value with no key (``: v`` at the start of a line) are refused here and read
by ruamel; a single pair ``["a":b]`` is read here and refused by
ruamel, so an edit of such a file says where ruamel stops (``intent/engine``).

Pure: text in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner
from yaml.tokens import AliasToken, AnchorToken, StreamEndToken, Token

from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.messages import yaml_problem

MAX_BYTES: Final = 4 * 1024 * 1024

_TAG: Final = "tag:yaml.org,2002:"
NULL, BOOL, INT, FLOAT, STR = (_TAG + t for t in ("null", "bool", "int", "float", "str"))
MERGE, TIMESTAMP, MAP, SEQ = (_TAG + t for t in ("merge", "timestamp", "map", "seq"))
#: YAML 1.1's line breaks that YAML 1.2 reads as characters -> their stand-ins while parsing.
_STAND_INS: Final[dict[str, str | int | None]] = {
    "\x85": "\ue085",
    "\u2028": "\ue028",
    "\u2029": "\ue029",
}

#: Where an anchor or alias name may be cut short (``_name_cut_short``).
_CUT_SHORT: Final = re.compile(r"[&*][0-9A-Za-z_-]+[:?]")
#: A ``%YAML`` directive (they come before the document's ``---``): ruamel honours ``1.1``.
_VERSION: Final = re.compile(r"^%YAML[ \t]+(\S+)", re.MULTILINE)


class _Resolver(BaseResolver):
    """YAML 1.2's implicit types, with ruamel.yaml's own patterns (``ruamel/yaml/resolver.py``,
    version 1.2): what an untagged plain scalar is. No timestamps: they stay text."""


for _tag, _pattern, _first in (
    (BOOL, r"true|True|TRUE|false|False|FALSE", "tTfF"),
    (
        FLOAT,
        r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
        r"|[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)"
        r"|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
    (INT, r"[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+", "-+0123456789"),
    (MERGE, r"<<", "<"),
):
    _Resolver.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), list(_first))
_Resolver.add_implicit_resolver(NULL, re.compile(r"^(?:~|null|Null|NULL|)$"), [*"~nN", ""])


class _PureComposer(Reader, Scanner, Parser, Composer, _Resolver):
    """PyYAML's pure-Python parser: ruamel's words and marks for what libyaml refuses."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _Resolver.__init__(self)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _FastComposer(CParser, _Resolver):
        """libyaml's parser and composer with the resolver above."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            _Resolver.__init__(self)

    _FAST: type[Any] | None = _FastComposer
else:  # PyYAML built without libyaml: the pure-Python parser reads every file
    _FAST = None


def _compose_with(composer: type[Any], text: str) -> Node | None:
    loader = composer(text)
    try:
        node: Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()


def _name_cut_short(text: str) -> Token | None:
    """An anchor or alias whose name YAML 1.1 ends at a ``:`` or ``?`` that YAML 1.2 (ruamel)
    takes into it: ``&a: b`` is an anchor on an empty key here, an anchor ``a:`` there."""
    if _CUT_SHORT.search(text) is None:  # the tokens are scanned only when it can happen
        return None
    scanner = (_FAST or _PureComposer)(text)
    try:
        while not scanner.check_token(StreamEndToken):
            token: Token = scanner.get_token()
            end = token.end_mark.index
            if isinstance(token, AnchorToken | AliasToken) and text[end : end + 1] in (":", "?"):
                return token
    except Exception:  # not YAML: composing it says where
        return None
    finally:
        scanner.dispose()
    return None


#: Deeper flow nesting than this is never composed by libyaml: its C composer recurses on the
#: C stack, and 100,000 ``[`` end the process with a segmentation fault; the pure-Python one
#: raises RecursionError, which is refused at a position like any other error.
_FAST_DEPTH: Final = 2_000


def _too_deep_for_c(text: str) -> bool:
    """Whether ``text`` may nest flow collections deeper than ``_FAST_DEPTH`` (brackets in
    quotes and comments counted too: a false alarm only costs the slower parser)."""
    if text.count("[") + text.count("{") <= _FAST_DEPTH:
        return False
    depth = 0
    for char in text:
        if char in "[{":
            depth += 1
            if depth > _FAST_DEPTH:
                return True
        elif char in "]}" and depth:
            depth -= 1
    return False


def _compose(text: str) -> Node | None:
    """The document's node tree (None: no document). Raises PyYAML's errors as the
    pure-Python parser words them (ruamel's words), or RecursionError."""
    if _FAST is not None and "\t" not in text and not _too_deep_for_c(text):
        try:
            return _compose_with(_FAST, text)
        except Exception:  # read again below, for ruamel's words and marks
            pass
    return _compose_with(_PureComposer, text)


# --- values ------------------------------------------------------------------------------------


def _int(text: str) -> int:
    digits = text.replace("_", "")
    sign = -1 if digits[:1] == "-" else 1
    digits = digits.lstrip("+-")
    for prefix, base in (("0b", 2), ("0x", 16), ("0o", 8)):
        if digits.startswith(prefix):
            return sign * int(digits[2:], base)
    return sign * int(digits)  # YAML 1.2: a leading zero is not octal


def _float(text: str) -> float:
    digits = text.replace("_", "").lower()
    sign = -1.0 if digits[:1] == "-" else 1.0
    digits = digits.lstrip("+-")
    if digits == ".inf":
        return sign * float("inf")
    if digits == ".nan":
        return float("nan")
    return sign * float(digits)


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


def _null(text: str) -> None:
    if text not in ("", "~", "null", "Null", "NULL"):
        raise ValueError(text)


_CONVERT: Final[dict[str, Callable[[str], Any]]] = {
    NULL: _null,
    BOOL: _bool,
    INT: _int,
    FLOAT: _float,
    STR: str,
    TIMESTAMP: str,
    MERGE: str,  # ``<<`` as a value, not a key: text
}


def _shown_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


class _Builder:
    """Plain values from a node tree, and for each mapping and list the nodes of its keys,
    values and items (keyed by the ``id`` of the value built). A node reached again through
    an alias is built once and shared, so a "billion laughs" file costs what its text costs."""

    def __init__(self, back: dict[int, str] | None = None) -> None:
        self.back = back  # stand-in -> the character it stands for
        self.memo: dict[int, Any] = {}
        self.maps: dict[int, dict[str, tuple[Node, Node]]] = {}
        self.seqs: dict[int, list[Node]] = {}
        self.problems: list[tuple[Node, str]] = []

    def value(self, node: Node) -> Any:
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        seen = self.memo.get(id(node))
        if seen is not None:
            return seen
        if isinstance(node, SequenceNode):
            self._tag(node, SEQ)
            items: list[Any] = []
            self.memo[id(node)] = items
            self.seqs[id(items)] = list(node.value)
            items.extend(self.value(item) for item in node.value)
            return items
        assert isinstance(node, MappingNode)
        self._tag(node, MAP)
        out: dict[str, Any] = {}
        self.memo[id(node)] = out
        pairs: dict[str, tuple[Node, Node]] = {}
        values: set[Any] = set()  # the keys as read: ``1`` and ``1.0`` are one key to ruamel
        merged: list[tuple[str, tuple[Node, Node]]] = []
        merge_seen = False
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                if merge_seen:
                    self.problems.append((key_node, _duplicate("<<")))
                merge_seen = True
                merged.extend(self._merged(value_node))
                continue
            key, read = self._key(key_node)
            if key in pairs or read in values:
                self.problems.append((key_node, _duplicate(key)))
                continue
            values.add(read)
            pairs[key] = (key_node, value_node)
            out[key] = self.value(value_node)
        for key, (key_node, value_node) in merged:  # written keys win; then the first merged
            if key not in pairs:
                pairs[key] = (key_node, value_node)
                out[key] = self.value(value_node)
        self.maps[id(out)] = pairs
        return out

    def _merged(self, node: Node) -> Iterator[tuple[str, tuple[Node, Node]]]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, MappingNode):
                self.problems.append((source, "'<<' merges a mapping or a list of mappings"))
                continue
            built = self.value(source)
            yield from self.maps.get(id(built), {}).items()

    def _key(self, node: Node) -> tuple[str, Any]:
        """A key as text (as the schema sees it) and as read (compared as ruamel compares)."""
        value = self.value(node)
        if isinstance(value, list):
            value = tuple(value)
        text = value if isinstance(value, str) else str(value)
        return text, value if isinstance(value, int | float) else text

    def _scalar(self, node: ScalarNode) -> Any:
        text: str = node.value if self.back is None else node.value.translate(self.back)
        convert = _CONVERT.get(node.tag)
        if convert is None:
            self._tag(node, STR)
            return text
        try:
            return convert(text)
        except ValueError:  # ``!!int abc``: the schema says what is wrong with the text
            return text

    def _tag(self, node: Node, expected: str) -> None:
        if node.tag != expected:
            self.problems.append(
                (
                    node,
                    f"the YAML tag {_shown_tag(node.tag)!r} is not allowed in a desired file; "
                    "remove it",
                )
            )


def _duplicate(key: str) -> str:
    return f"duplicate key {key!r}: a key may appear only once in a mapping"


# --- the tree ----------------------------------------------------------------------------------

#: A pydantic ``loc``: the keys and list indexes from the file's root to a value.
Loc = Sequence[int | str]


@dataclass(frozen=True, slots=True, eq=False)
class Tree:
    """A YAML document: its plain ``data`` (never changed: copy before changing it) and the
    node tree it was built from, for positions."""

    data: Any
    node: Node | None = None
    maps: dict[int, dict[str, tuple[Node, Node]]] | None = None
    seqs: dict[int, list[Node]] | None = None

    def pairs(self, mapping: Any) -> dict[str, tuple[Node, Node]]:
        """(key node, value node) of each key of ``mapping``, a dict of ``data``."""
        return (self.maps or {}).get(id(mapping), {})

    def items(self, seq: Any) -> list[Node]:
        """The node of each item of ``seq``, a list of ``data``."""
        return (self.seqs or {}).get(id(seq), [])

    def at(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        """The 1-based line and column of the value ``loc`` names (``key``: of its key). An
        empty value has no place of its own: its key's. A ``loc`` that leaves the tree stops
        at the last place found."""
        value = self.data
        line, col = 0, 0
        if self.node is not None and isinstance(value, dict | list):
            line, col = self.node.start_mark.line, self.node.start_mark.column
        for i, step in enumerate(loc):
            if isinstance(value, dict) and isinstance(step, str) and step in value:
                key_node, value_node = self.pairs(value)[step]
                at_key = (key or value[step] is None) and i == len(loc) - 1
                mark = (key_node if at_key else value_node).start_mark
                value = value[step]
            elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
                mark = self.items(value)[step].start_mark
                value = value[step]
            else:
                break
            line, col = mark.line, mark.column
        return line + 1, col + 1


def _place(text: str, index: int) -> tuple[int, int]:
    """The 1-based line and column of ``text[index]``."""
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def refusal(error: Exception, text: str, source: str) -> InvalidDesiredState:
    """``error``, raised reading ``text``, as ``file:line:col: message``. It may come from
    PyYAML or from ruamel.yaml (``intent/roundtrip``): their errors have the same fields
    (``problem``, ``context`` and their marks; a reader error's ``position`` and
    ``character``), so the round trip's refusals read as the loader's."""

    def refuse(line: int, col: int, message: str) -> InvalidDesiredState:
        return InvalidDesiredState([Diagnostic(source, line, col, message)])

    position, character = getattr(error, "position", None), getattr(error, "character", None)
    if isinstance(position, int) and character is not None:  # a character YAML does not allow
        line, col = _place(text, position)
        char = chr(character) if isinstance(character, int) else str(character)[:1]
        what = f"character U+{ord(char):04X}" if char else "a character"
        return refuse(line, col, f"{what} is not allowed in a YAML file")
    if hasattr(error, "problem_mark"):  # a MarkedYAMLError
        problem = getattr(error, "problem", None) or ""
        context = getattr(error, "context", None) or ""
        context_at = getattr(error, "context_mark", None)
        at = error.problem_mark or context_at
        line, col = (at.line + 1, at.column + 1) if at else (1, 1)
        context_line = context_at.line + 1 if context_at else None
        if "quoted scalar" in context and context_at:
            line, col = context_at.line + 1, context_at.column + 1
        return refuse(line, col, yaml_problem(problem, context, text, line, col, context_line))
    if isinstance(error, RecursionError):
        return refuse(1, 1, "YAML nests too deeply")
    said = str(error).splitlines()[0] if str(error) else type(error).__name__
    return refuse(1, 1, f"YAML: {said}")  # the parsers raise a zoo of types on hostile input


def parse_tree(text: str, source: str) -> Tree:
    """The document in ``text``; raises InvalidDesiredState with every YAML problem's
    position (``source`` names the file)."""

    def refuse(line: int, col: int, message: str) -> InvalidDesiredState:
        return InvalidDesiredState([Diagnostic(source, line, col, message)])

    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise refuse(1, 1, "file is larger than 4 MiB")
    if "\x00" in text:
        raise refuse(1, 1, "file contains a NUL byte")
    directive = _VERSION.search(text.split("\n---", 1)[0])
    if directive is not None and directive.group(1) != "1.2":
        line, col = _place(text, directive.start())
        said = f"'%YAML {directive.group(1)}': a desired file is read as YAML 1.2 (as every"
        raise refuse(line, col, said + " edit reads it); remove this line")
    read, back = text, None
    if any(c in text for c in _STAND_INS):
        taken = next((str(c) for c in _STAND_INS.values() if str(c) in text), None)
        if taken is not None:
            line, col = _place(text, text.index(taken))
            said = f"character U+{ord(taken):04X} cannot be read in a file with U+0085, U+2028"
            raise refuse(line, col, said + " or U+2029 in it")
        read = text.translate(str.maketrans(_STAND_INS))
        back = str.maketrans({str(v): k for k, v in _STAND_INS.items()})
    cut = _name_cut_short(read)
    if cut is not None:
        line, col = cut.start_mark.line + 1, cut.start_mark.column + 1
        name = text[cut.start_mark.index : cut.end_mark.index + 1]
        said = f"{name!r}: YAML 1.2 reads this name with its {name[-1]!r} (as every edit reads"
        raise refuse(line, col, said + f" it); put a space before {name[-1]!r}")
    try:
        node = _compose(read)
        if node is None:
            return Tree(None)
        builder = _Builder(back)
        data = builder.value(node)
    except Exception as e:  # RecursionError too: nested too deeply
        raise refusal(e, text, source) from None
    if builder.problems:
        found = {
            Diagnostic(source, n.start_mark.line + 1, n.start_mark.column + 1, message)
            for n, message in builder.problems
        }
        raise InvalidDesiredState(sorted(found, key=lambda d: (d.line, d.col, d.message)))
    return Tree(data, node, builder.maps, builder.seqs)
