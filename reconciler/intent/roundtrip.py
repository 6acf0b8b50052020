"""Round-trip YAML for intent edits: load, change, and render keeping the user's text.

May: parse and render text with ruamel.yaml round-trip mode, move comments inside a tree.
May not: read or write files, validate the schema (``reconciler.model.load`` does that).

ruamel keeps comments and key order, but it re-indents lists to one style, respaces comments
after flow values and so on. ``Doc.sync`` therefore never returns ruamel's whole output: it diffs
ruamel's rendering of the *unedited* tree against its rendering of the edited one and splices
only the changed lines into the user's original text (a three-way merge in which the edit wins
where both touch the same lines). Untouched lines stay byte-identical; the result is checked to
load to the edited data, and ruamel's full output is used only if that check fails.
"""

from __future__ import annotations

import copy
import difflib
import io
import re
from collections.abc import Iterator
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor

from reconciler.model.load_yaml import refusal

Node = CommentedMap | CommentedSeq


_ITEM_RE: Final = re.compile(r"^( *)- +(?=\S)")
_KEY_RE: Final = re.compile(r"^( *)[^\s#-][^#]*:\s*(#.*)?$")


def _indents(text: str) -> tuple[int, int]:
    """(sequence indent, dash offset) of the first block list under a key, as ruamel's
    ``indent()`` wants them; (2, 0) when the text has none. Text only: no second parse."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        item = _ITEM_RE.match(line)
        if item is None:
            continue
        above = next(
            (p for p in reversed(lines[:i]) if p.strip() and not p.lstrip().startswith("#")), ""
        )
        key = _KEY_RE.match(above)
        if key is None:
            continue
        offset = len(item.group(1)) - len(key.group(1))
        if offset >= 0:
            return max(item.end() - len(key.group(1)), offset + 2), offset
    return 2, 0


class _TextTimestamps(RoundTripConstructor):
    """Timestamps stay text, as the loader reads them (``model/load_yaml``): an impossible one
    (month 13) is the schema's to report, and the tree holds what the file says."""


_TextTimestamps.add_constructor(
    "tag:yaml.org,2002:timestamp", RoundTripConstructor.construct_yaml_str
)


def _yaml(text: str) -> YAML:
    y = YAML(typ="rt")
    y.Constructor = _TextTimestamps
    y.allow_duplicate_keys = False
    y.preserve_quotes = True
    y.width = 4096
    sequence, offset = _indents(text)
    y.indent(mapping=2, sequence=sequence, offset=offset)
    return y


def load(text: str, source: str) -> Any:
    """The round-trip tree of ``text``, which the loader has read (``model/load_yaml``);
    raises InvalidDesiredState (``file:line:col``) when ruamel cannot read it after all."""
    try:
        return _yaml(text).load(text)
    except Exception as e:  # ruamel raises a zoo of types: worded as the loader words its own
        raise refusal(e, text, source) from None


def plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    return node


def _hunks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _merge(original: str, base: str, edited: str) -> str:
    """Three-way merge on lines: base->original is formatting, base->edited is the edit."""
    o, a, b = (t.splitlines(keepends=True) for t in (original, base, edited))
    fmt = [(i1, i2, j1, j2, False) for i1, i2, j1, j2 in _hunks(a, o)]
    edit = [(i1, i2, j1, j2, True) for i1, i2, j1, j2 in _hunks(a, b)]
    out: list[str] = []
    pos = 0  # next line of ``a`` not yet emitted
    d_o = d_b = 0  # line offsets original-minus-base and edited-minus-base before ``pos``
    for cluster in _clusters(sorted(fmt + edit, key=lambda h: (h[0], h[1]))):
        start = cluster[0][0]
        end = max(h[1] for h in cluster)
        out.extend(o[pos + d_o : start + d_o])  # unchanged stretch: the user's own lines
        grow_o = sum((h[3] - h[2]) - (h[1] - h[0]) for h in cluster if not h[4])
        grow_b = sum((h[3] - h[2]) - (h[1] - h[0]) for h in cluster if h[4])
        if any(h[4] for h in cluster):
            out.extend(b[start + d_b : end + d_b + grow_b])
        else:
            out.extend(o[start + d_o : end + d_o + grow_o])
        d_o += grow_o
        d_b += grow_b
        pos = end
    out.extend(o[pos + d_o :])
    return "".join(out)


def _clusters(
    hunks: list[tuple[int, int, int, int, bool]],
) -> Iterator[list[tuple[int, int, int, int, bool]]]:
    """Hunks (sorted by start) grouped where they overlap or touch."""
    group: list[tuple[int, int, int, int, bool]] = []
    end = -1
    for h in hunks:
        if group and h[0] > end:
            yield group
            group = []
        group.append(h)
        end = max(end, h[1]) if len(group) > 1 else h[1]
    if group:
        yield group


# --- comments that ruamel attaches to the last element before them ---------------------------


def _holder(node: Any) -> tuple[Node, Any] | None:
    """The innermost (container, key-or-index) whose comment slot holds the lines after
    ``node`` (ruamel hangs a following full-line comment on the deepest last scalar)."""
    if isinstance(node, CommentedMap) and node:
        key = list(node)[-1]
        inner = _holder(node[key]) if not _is_flow(node[key]) else None
        return inner or (node, key)
    if isinstance(node, CommentedSeq) and node:
        inner = _holder(node[-1]) if not _is_flow(node[-1]) else None
        return inner or (node, len(node) - 1)
    return None


def _is_flow(node: Any) -> bool:
    return isinstance(node, CommentedMap | CommentedSeq) and bool(node.fa.flow_style())


def _slot(container: Node) -> int:
    return 2 if isinstance(container, CommentedMap) else 0


def take_trailing(node: Any) -> Any:
    """Detach and return the full-line comments after ``node`` (its inline comment stays)."""
    found = _holder(node)
    if found is None:
        return None
    container, key = found
    entry = container.ca.items.get(key)
    token = entry[_slot(container)] if entry else None
    if token is None or "\n" not in token.value:
        return None
    cut = token.value.index("\n") + 1
    head, tail = token.value[:cut], token.value[cut:]
    if not tail:
        return None
    rest = copy.copy(token)
    rest.value = tail
    if head.strip():
        token.value = head
    else:
        entry[_slot(container)] = None
    return rest


def put_trailing(node: Any, token: Any) -> None:
    """Hang ``token`` (from ``take_trailing``) after ``node``'s last line."""
    found = _holder(node)
    if token is not None and found is not None:
        _attach(*found, token)


def _attach(container: Node, key: Any, token: Any) -> None:
    size = 4 if isinstance(container, CommentedMap) else 2
    entry = container.ca.items.setdefault(key, [None] * size)
    existing = entry[_slot(container)]
    if existing is None:
        token.value = "\n" + token.value
        entry[_slot(container)] = token
    else:
        existing.value = existing.value.rstrip("\n") + "\n" + token.value


def append_item(seq: CommentedSeq, item: Any) -> None:
    """Append to a block list, keeping comments after the old last item after the new one."""
    tail = take_trailing(seq[-1]) if len(seq) and not _is_flow(seq) else None
    seq.append(item)
    put_trailing(seq[-1], tail)


def _is_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def delete_item_text(text: str, parent: CommentedMap, key: str, index: int) -> str | None:
    """``text`` without the block-list item ``parent[key][index]`` (None: not a block list).

    Works on lines, because ruamel hangs the full-line comments *after* an item on the item
    itself: deleting it in the tree would delete the comments that introduce the next item or
    section. Here the item's own lines (with their inline comments) go; the blank and comment
    lines after its last line stay. An emptied list becomes ``key: []``.
    """
    seq = parent[key]
    if not isinstance(seq, CommentedSeq) or _is_flow(seq):
        return None
    lines = text.splitlines(keepends=True)
    start, col = seq.lc.item(index)
    dash = lines[start].rfind("-", 0, col + 1)
    if dash < 0:
        return None
    end = start + 1
    while end < len(lines) and (
        _is_filler(lines[end]) or len(lines[end]) - len(lines[end].lstrip(" ")) > dash
    ):
        end += 1
    while end > start + 1 and _is_filler(lines[end - 1]):
        end -= 1
    if len(seq) == 1:
        line, kcol = parent.lc.key(key)
        colon = lines[line].find(":", kcol)
        if colon < 0 or line >= start:
            return None
        lines[line] = lines[line][: colon + 1] + " []" + lines[line][colon + 1 :]
    del lines[start:end]
    return "".join(lines)


class OutsideWindow(Exception):
    """An edit of a ``partial`` Doc needs what was left out of it (``intent.window``): the
    engine edits the whole file instead. Never leaves the engine."""


class Doc:
    """A desired file being edited: its text plus a round-trip tree to change in place.

    Change ``tree`` freely; ``sync()`` splices the changes into ``text`` and reloads the tree
    (so references into the old tree go stale). ``delete_item`` syncs, deletes on lines and
    reloads. ruamel renders with the list indentation of the original text. ``partial``: the
    text is a window of the file (``intent.window``), without some of its entries.
    """

    def __init__(self, text: str, source: str, *, partial: bool = False) -> None:
        self.source = source
        self.partial = partial
        self._yaml = _yaml(text)
        self.text = text
        self._tree: Any = None
        self._base = ""  # ruamel's rendering of the tree as loaded, before any change

    @property
    def tree(self) -> Any:
        """The round-trip tree of ``text`` (loaded on first use after each sync)."""
        if self._tree is None:
            self._tree = load(self.text, self.source)
            self._base = self._dump(self._tree)
        return self._tree

    def _dump(self, tree: Any) -> str:
        out = io.StringIO()
        self._yaml.dump(tree, out)
        return out.getvalue()

    def sync(self) -> str:
        """Splice the tree's changes into ``text``; returns the new text."""
        if self._tree is None:
            return self.text
        edited = self._dump(self._tree)
        if edited != self._base:
            merged = edited
            if self._base != self.text:
                merged = _merge(self.text, self._base, edited)
                try:
                    same = plain(load(merged, self.source)) == plain(self._tree)
                except Exception:  # a merge ruamel cannot read: use its own rendering
                    same = False
                merged = merged if same else edited
            self.text = merged
        self._tree = None
        return self.text

    def delete_item(self, path: tuple[str | int, ...], key: str, index: int) -> None:
        """Delete item ``index`` of the list at ``path + (key,)`` from the root."""
        self.sync()
        parent = self.tree
        for step in path:
            parent = parent[step]
        text = delete_item_text(self.text, parent, key, index)
        if text is None:
            del parent[key][index]
            self.sync()
        else:
            self.text, self._tree = text, None
