"""Intent edits of workloads: set one, restart it (a generation bump), stop it (remove it).

Same contract as ``intent.edits``: each function changes the round-trip tree of desired.yaml
in place and explains itself with ``ctx.note``; the engine validates the result with the
controller's own parser. ``name`` is a slot with its own entry in ``slots:`` or a race group
(whose workload runs on whichever candidate wins).

- ``SetWorkload`` sets the given fields of that entry's ``workload:`` block (creating it);
  ``None`` leaves a field as it is, ``env``/``secret_env`` replace the whole mapping. On a race
  group it also sets ``across`` (in the block) and ``min_count`` (the group's own key); the
  engine's parse then checks them as the loader does (``model/load_across``).
- ``RestartWorkload`` bumps the block's ``generation``: the running attempt is stopped and a
  new run (new run id, attempt 1, no failures) starts. A slot whose workload comes from its
  race group, generator or ``defaults`` gets a block of its own holding just the bump.
- ``StopWorkload`` removes the entry's ``workload:`` block: the controller stops the program
  (SIGTERM, then SIGKILL after ``stop_grace``) and forgets it. A workload inherited from
  elsewhere cannot be removed here; the refusal says where it is defined.

Restart and stop end a running program, and so does a ``workload_set`` that changes what runs
(command, workdir, env, secret_env: ``SetWorkload.changes_what_runs``). Whether it *is*
running is the controller's snapshot, which edits do not read: the surfaces (MCP, CLI) check it
with ``intent.workload_views.live`` and ask for confirmation before they apply these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.errors import EditRejected
from reconciler.intent.edits import Edit, EditContext, child_map, del_key, group_index, set_key
from reconciler.intent.edits import slot_entry as _slot_entry
from reconciler.model import names

#: Fields that decide what runs: changing one of them starts a new run.
_IDENTITY = ("command", "workdir", "env", "secret_env")
_FIELDS = (
    *_IDENTITY,
    "restart",
    "max_failures",
    "stall_after",
    "stop_grace",
    "when_done",
    "keep_attempts",
    "idle_after",
    "idle_below",
    "take_tpu",
    "across",
)


def _entry(ctx: EditContext, name: str) -> tuple[CommentedMap, str]:
    """The slot's own entry, or the race group's; and how to call it in notes."""
    names.check_name(name)
    gi = group_index(ctx, name)
    if gi is not None and ctx.desired.slot(name) is None:
        entry = ctx.root["race_groups"][gi]
        assert isinstance(entry, CommentedMap)
        ctx.about(*[str(s) for s in entry.get("slots") or []])
        return entry, f"race group {name!r}"
    entry = _slot_entry(ctx, name)
    ctx.about(name)
    return entry, repr(name)


def _yaml(value: Any) -> Any:
    if isinstance(value, Mapping):
        out = CommentedMap()
        for k, v in value.items():
            out[str(k)] = v
        out.fa.set_flow_style()
        return out
    if isinstance(value, list | tuple):
        seq = CommentedSeq(list(value))
        seq.fa.set_flow_style()
        return seq
    return value


@dataclass(frozen=True, slots=True)
class SetWorkload(Edit):
    """The given fields of the ``workload:`` block of slot or race group ``name`` (created if
    absent); None leaves a field as it is, ``env`` / ``secret_env`` replace the whole mapping.
    ``command`` is a string run by ``bash -lc`` on every worker, or an argv list.
    ``keep_attempts``: attempt directories kept on each worker (1..10000). ``across`` and
    ``min_count`` are a race group's (``across: group``: one program over its winners)."""

    kind: ClassVar[str] = "set_workload"
    name: str
    command: str | tuple[str, ...] | None = None
    workdir: str | None = None
    env: Mapping[str, str] | None = None
    secret_env: Mapping[str, str] | None = None
    restart: str | None = None
    max_failures: int | None = None
    stall_after: str | float | None = None
    stop_grace: str | float | None = None
    when_done: str | None = None
    keep_attempts: int | None = None  # attempt directories kept on each worker (1..10000)
    idle_after: str | float | None = None  # every chip idle this long = a hang (telemetry)
    idle_below: float | None = None  # the duty cycle (percent) under which a chip is idle
    take_tpu: bool | None = None  # stop others' processes holding the chips before a launch
    across: str | None = None  # a race group's: "group" (one program over its winners) or "slot"
    min_count: int | None = None  # a race group's, with across: group: winners before it starts

    @property
    def changes_what_runs(self) -> bool:
        """This edit may start a new run (stopping the old one)."""
        return any(getattr(self, k) is not None for k in _IDENTITY)

    def apply(self, ctx: EditContext) -> None:
        given = {key: getattr(self, key) for key in _FIELDS}
        if all(v is None for v in given.values()) and self.min_count is None:
            raise EditRejected(f"nothing to change: give one of {', '.join(_FIELDS)}, min_count")
        entry, what = _entry(ctx, self.name)
        if self.min_count is not None:
            _set_min_count(ctx, entry, what, self.min_count)
            if all(v is None for v in given.values()):
                return
        block = child_map(entry, "workload")
        changes = [k for k, v in given.items() if v is not None and block.get(k) != _plain(v)]
        for key in _FIELDS:
            value = given[key]
            if value is not None and set_key(block, key, _yaml(value)):
                shown = "{...}" if key in ("env", "secret_env") else _plain(value)
                ctx.note(f"{what}: workload.{key}: {shown}")
        if not changes:
            ctx.note(f"{what}: the workload already says that")
        elif any(k in _IDENTITY for k in changes):
            ctx.note("what runs changed: the controller stops the old run and starts a new one")


def _set_min_count(ctx: EditContext, entry: CommentedMap, what: str, value: int) -> None:
    """``min_count`` is the race group's own key (beside ``count``), not the workload's; the
    parser then checks it as in a hand-written file (across: group, at most count)."""
    if not what.startswith("race group"):
        raise EditRejected(f"min_count is a race group's key; {what} is a slot")
    if set_key(entry, "min_count", value):
        ctx.note(f"{what}: min_count: {value} (the program starts once that many winners are up)")
    else:
        ctx.note(f"{what}: min_count is already {value}")


def _plain(value: Any) -> Any:
    """An argument as the YAML tree compares and notes it: a tuple is a list, a mapping a dict."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


@dataclass(frozen=True, slots=True)
class RestartWorkload(Edit):
    """``workload.generation`` + 1: the running attempt is stopped and a new run starts."""

    kind: ClassVar[str] = "restart_workload"
    name: str

    def apply(self, ctx: EditContext) -> None:
        entry, what = _entry(ctx, self.name)
        spec = ctx.desired.slot(self.name)
        if "workload" not in entry and (spec is None or spec.workload is None):
            raise EditRejected(
                f"{what} has no workload: nothing to restart (give it one with "
                "`tpu-reconciler workload set` or MCP workload_set)"
            )
        block = child_map(entry, "workload")
        generation = int(block.get("generation", 0)) + 1
        set_key(block, "generation", generation)
        ctx.note(
            f"{what}: workload.generation: {generation} (the controller stops it and starts a "
            "new run: new run id, attempt 1, failures 0)"
        )


@dataclass(frozen=True, slots=True)
class StopWorkload(Edit):
    """The ``workload:`` block removed: the controller stops the program and forgets it."""

    kind: ClassVar[str] = "stop_workload"
    name: str

    def apply(self, ctx: EditContext) -> None:
        entry, what = _entry(ctx, self.name)
        spec = ctx.desired.slot(self.name)
        if "workload" not in entry:
            if spec is not None and spec.workload is not None:
                where = (
                    f"race group {spec.race_group!r}"
                    if spec.race_group and _group_has_workload(ctx, spec.race_group)
                    else "a generator or defaults.workload"
                )
                raise EditRejected(f"{what}'s workload is defined in {where}; stop it there")
            ctx.note(f"{what} has no workload: nothing to stop")
            return
        del_key(entry, "workload")
        ctx.note(f"{what}: workload removed; the controller stops it (SIGTERM, then SIGKILL)")


def _group_has_workload(ctx: EditContext, group: str) -> bool:
    gi = group_index(ctx, group)
    return gi is not None and "workload" in ctx.root["race_groups"][gi]
