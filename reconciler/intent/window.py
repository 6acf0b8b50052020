"""The part of a desired file an edit works on: its lines, with the ``slots:`` and
``race_groups:`` entries it does not touch left out.

ruamel.yaml's round trip keeps comments but reads and writes a 1,000-slot file in about a
second each way, and an edit needs only a handful of its entries. ``Window.around`` keeps the
file's lines except the entries of the block lists ``slots`` and ``race_groups`` that the edit
does not name: the named slots and race groups, the race groups of the named slots, the
candidates of those groups, and each list's first and last entries (so the list keeps its
indentation, an entry is appended after the true last one, and deleting one entry never
empties it). The edit runs on that text (``intent.roundtrip.Doc`` with ``partial``: a lookup
of an entry left out raises ``OutsideWindow``), and ``splice`` puts the changed lines back at
the same places in the whole file. An entry left out is its lines from the end of the entry
before it to its own last line: the comment and blank lines above it go with it, its own
trailing comment stays on its last line.

Nothing here is trusted blindly: ``agrees`` compares the whole new file, read by the loader,
with the edited window (every entry left out back in its place, unchanged); the engine falls
back to the round trip of the whole file when a window cannot be made (a flow-style list,
entries without names), when a change spans an entry left out, or when they disagree.

May: compute on text and the loader's tree. May not: read or write files.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.intent.roundtrip import OutsideWindow
from reconciler.model.desired import Desired
from reconciler.model.load_yaml import Tree

#: The top-level lists whose untouched entries are left out.
LISTS: Final = ("slots", "race_groups")
#: A line and its break, as YAML counts lines (``\n``, ``\r\n`` or ``\r``).
_LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lines(text: str) -> list[str]:
    """``text``'s lines with their breaks, as the loader's positions count them."""
    return _LINE.findall(text)


def _last_line(entry: Node, whole: list[str]) -> int:
    """The 0-based line on which ``entry``'s own text ends: its last value's (a block
    collection's end mark is where the next token starts, after any comments), less the blank
    lines a block scalar takes in (they stay with what follows)."""
    node = entry
    while isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, MappingNode) else last
    end = int(node.end_mark.line)
    if isinstance(node, ScalarNode) and node.style in ("|", ">") and node.end_mark.column == 0:
        end -= 1  # a block scalar's end mark is the start of the line after it
        while end > int(node.start_mark.line) and not whole[end].strip():
            end -= 1
    return max(end, int(entry.start_mark.line))


def _name(entry: Any) -> str | None:
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) else None


def _named(items: Iterable[Any]) -> list[str] | None:
    names = [_name(i) for i in items]
    if any(n is None for n in names) or len(set(names)) != len(names):
        return None
    return [str(n) for n in names]


@dataclass(frozen=True, slots=True)
class Window:
    """A desired file's text with some entries left out (see the module docstring)."""

    whole: list[str]  # the file's lines
    kept: list[int]  # the index in ``whole`` of each line of the window
    left_out: Mapping[str, Mapping[str, Any]]  # list -> entry name -> its data, in file order

    @property
    def text(self) -> str:
        return "".join(self.whole[i] for i in self.kept)

    @classmethod
    def around(
        cls, text: str, tree: Tree, named: Collection[str], desired: Desired
    ) -> Window | None:
        """The window for an edit naming ``named`` (slots or race groups) in ``text`` (read as
        ``tree``, resolved as ``desired``); None when nothing would be left out."""
        groups = set(named)
        groups.update(s.race_group for n in named if (s := desired.slot(n)) and s.race_group)
        slots = set(named)
        for group in desired.race_groups:
            if group.name in groups:
                slots.update(group.slots)
        keep = {"slots": slots, "race_groups": groups}
        root = tree.node
        if not isinstance(tree.data, dict) or not isinstance(root, MappingNode) or root.flow_style:
            return None
        whole = lines(text)
        gone: set[int] = set()
        left_out: dict[str, dict[str, Any]] = {}
        for key in LISTS:
            items = tree.data.get(key)
            node = tree.pairs(tree.data).get(key, (None, None))[1]
            names = _named(items) if isinstance(items, list) else None
            if names is None or not isinstance(node, SequenceNode) or node.flow_style:
                continue
            assert isinstance(items, list)
            ends = [_last_line(n, whole) for n in node.value]
            for i in range(1, len(items) - 1):
                if names[i] not in keep[key] and ends[i - 1] < ends[i]:
                    gone.update(range(ends[i - 1] + 1, ends[i] + 1))
                    left_out.setdefault(key, {})[names[i]] = items[i]
        if not gone:
            return None
        return cls(whole, [i for i in range(len(whole)) if i not in gone], left_out)

    def splice(self, edited: str) -> str:
        """The whole file with the window's changes (``edited`` is the edited window) at their
        places; OutsideWindow when a change spans lines left out."""
        before = [self.whole[i] for i in self.kept]
        after = lines(edited)
        out = list(self.whole)
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
            if tag == "equal":
                continue
            if i1 < i2:
                first, last = self.kept[i1], self.kept[i2 - 1]
                if last - first != i2 - 1 - i1:
                    raise OutsideWindow("a change spans entries left out of the window")
                out[first : last + 1] = after[j1:j2]
            else:  # inserted after the window's line before: ahead of any entry left out
                at = self.kept[i1 - 1] + 1 if i1 else 0
                out[at:at] = after[j1:j2]
        return "".join(out)

    def agrees(self, whole: Any, window: Any) -> bool:
        """Whether ``whole`` (the data of the spliced file) is ``window`` (the edited window's)
        with every entry left out back, unchanged and in order."""
        if not isinstance(whole, dict) or not isinstance(window, dict):
            return False
        if list(whole) != list(window):
            return False
        for key, value in whole.items():
            gone = self.left_out.get(key)
            if gone is None:
                if value != window[key]:
                    return False
                continue
            if not isinstance(value, list):
                return False
            back = [v for v in value if _name(v) in gone]
            rest = [v for v in value if _name(v) not in gone]
            if rest != window[key] or back != list(gone.values()):
                return False
        return True
