"""Warnings about a valid desired file: settings that are allowed but will not do what they say.

``validate`` prints them after the file is found valid, each as ``file:line:col: warning: ...``
at the key that was written (the slot's own block, its race group's, its generator's or
``defaults``, whichever gave the slot its value). They never refuse a file.

- ``workload.idle_after`` on a slot without ``setup.telemetry``: the chips are never read, so
  the idle check never fails an attempt.
- ``setup.telemetry`` on a slot without ``setup.bootstrap``: the probe's client (its private
  venv) is installed by bootstrap alone, so every chip figure stays unknown (and ``idle_after``
  with it); the processes holding the chips are still found.

(``workload.take_tpu`` needs neither: the holders are found by the probe without its venv.)

One warning per place written, naming the first slot it concerns and how many more.

May: read the parsed YAML and the resolved intent. May not: do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.accelerators import canonical
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.load_yaml import parse_tree
from reconciler.model.vocabulary import DEFAULT_MODE

Loc = tuple[int | str, ...]


def _block(root: Mapping[str, Any], loc: Loc) -> Any:
    node: Any = root
    for step in loc:
        if isinstance(node, Mapping) and isinstance(step, str):
            node = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            return None
    return node


def _entries(root: Mapping[str, Any], key: str) -> list[tuple[int, Any]]:
    items = root.get(key)
    return list(enumerate(items)) if isinstance(items, list) else []


def _own(root: Mapping[str, Any], slot: SlotSpec, mode: str) -> Loc | None:
    """Where the slot itself is written: its ``slots:`` entry, or the generator that made it."""
    if not slot.generated:
        for i, entry in _entries(root, "slots"):
            if isinstance(entry, Mapping) and entry.get("name") == slot.name:
                return ("slots", i)
        return None
    for i, gen in _entries(root, "generate"):
        if not isinstance(gen, Mapping):
            continue
        zones, accelerators = gen.get("zones") or (), gen.get("accelerators") or {}
        if (
            slot.zone in zones
            and isinstance(accelerators, Mapping)
            and slot.accelerator in {canonical(str(a)) for a in accelerators}
            and (gen.get("mode") or mode) == slot.mode
        ):
            return ("generate", i)
    return None


def _group(root: Mapping[str, Any], slot: SlotSpec) -> Loc | None:
    for i, group in _entries(root, "race_groups"):
        if isinstance(group, Mapping) and group.get("name") == slot.race_group:
            return ("race_groups", i)
    return None


def _written(
    root: Mapping[str, Any], layers: Iterable[Loc | None], block: str, key: str
) -> Loc | None:
    """The innermost of ``layers`` whose ``block`` (``workload`` / ``setup``) sets ``key``."""
    for layer in layers:
        if layer is None:
            continue
        found = _block(root, (*layer, block))
        if isinstance(found, Mapping) and key in found:
            return (*layer, block, key)
    return None


def setup_warnings(text: str, desired: Desired) -> list[Diagnostic]:
    """The warnings of ``desired`` (resolved from ``text``), in file order."""
    concerns = [
        s
        for s in desired.slots
        if (s.workload is not None and s.workload.idle_after is not None and not s.setup.telemetry)
        or (s.setup.telemetry and not s.setup.bootstrap)
    ]
    if not concerns:
        return []
    try:
        pos = parse_tree(text, desired.source)
    except InvalidDesiredState:  # not the text the intent came from: nothing to point at
        return []
    root = pos.data
    if not isinstance(root, Mapping):
        return []
    defaults = _block(root, ("defaults",))
    default = DEFAULT_MODE
    mode = str(defaults.get("mode") or default) if isinstance(defaults, Mapping) else default
    found: dict[tuple[int, int, str], list[str]] = {}
    for s in concerns:
        own = _own(root, s, mode)
        if s.workload is not None and s.workload.idle_after is not None and not s.setup.telemetry:
            order = [own, _group(root, s), ("defaults",)]
            if s.generated:
                order = [_group(root, s), own, ("defaults",)]
            at = _written(root, order, "workload", "idle_after") or own or ()
            found.setdefault((*pos.at(at, key=True), "idle"), []).append(s.name)
        if s.setup.telemetry and not s.setup.bootstrap:
            at = _written(root, [own, ("defaults",)], "setup", "telemetry") or own or ()
            found.setdefault((*pos.at(at, key=True), "venv"), []).append(s.name)
    out = []
    for (line, col, kind), slots in sorted(found.items()):
        more = f" (and {len(slots) - 1} more)" if len(slots) > 1 else ""
        who = f"slot {slots[0]!r}{more}"
        if kind == "idle":
            message = (
                f"warning: workload.idle_after is set but setup.telemetry is off for {who}: "
                "its chips are never read, so an idle attempt is never failed"
            )
        else:
            message = (
                f"warning: setup.telemetry is on but setup.bootstrap is off for {who}: the "
                "probe's client is installed only by bootstrap, so every chip figure stays "
                "unknown (and idle_after never fires); the processes holding the chips are "
                "still found"
            )
        out.append(Diagnostic(desired.source, line, col, message))
    return out
