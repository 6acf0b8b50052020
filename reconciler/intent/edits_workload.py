"""Intent edits of workloads: set one, restart it (a generation bump), stop it (remove it).

Same contract as ``intent.edits``: each function changes the round-trip tree of desired.yaml
in place and explains itself with ``ctx.note``; the engine validates the result with the
controller's own parser. ``name`` is a slot with its own entry in ``slots:`` or a race group
(whose workload runs on whichever candidate wins).

- ``set_workload`` sets the given fields of that entry's ``workload:`` block (creating it);
  ``None`` leaves a field as it is, ``env``/``secret_env`` replace the whole mapping.
- ``restart_workload`` bumps the block's ``generation``: the running attempt is stopped and a
  new run (new run id, attempt 1, no failures) starts. A slot whose workload comes from its
  race group, generator or ``defaults`` gets a block of its own holding just the bump.
- ``stop_workload`` removes the entry's ``workload:`` block: the controller stops the program
  (SIGTERM, then SIGKILL after ``stop_grace``) and forgets it. A workload inherited from
  elsewhere cannot be removed here; the refusal says where it is defined.

Restart and stop end a running program, and so does a ``set_workload`` that changes what runs
(command, workdir, env, secret_env). Whether it *is* running is the controller's snapshot,
which edits do not read: the surfaces (MCP, CLI) check it with ``intent.workload_views.live``
and ask for confirmation before they call these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.errors import EditRejected
from reconciler.intent.edits import EditContext, child_map, del_key, group_index, set_key
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


def set_workload(
    ctx: EditContext,
    *,
    name: str,
    command: str | list[str] | None = None,
    workdir: str | None = None,
    env: dict[str, str] | None = None,
    secret_env: dict[str, str] | None = None,
    restart: str | None = None,
    max_failures: int | None = None,
    stall_after: str | float | None = None,
    stop_grace: str | float | None = None,
    when_done: str | None = None,
) -> None:
    given = {
        "command": command,
        "workdir": workdir,
        "env": env,
        "secret_env": secret_env,
        "restart": restart,
        "max_failures": max_failures,
        "stall_after": stall_after,
        "stop_grace": stop_grace,
        "when_done": when_done,
    }
    if all(v is None for v in given.values()):
        raise EditRejected(f"nothing to change: give one of {', '.join(_FIELDS)}")
    entry, what = _entry(ctx, name)
    block = child_map(entry, "workload")
    changes = [k for k, v in given.items() if v is not None and block.get(k) != v]
    for key in _FIELDS:
        value = given[key]
        if value is not None and set_key(block, key, _yaml(value)):
            shown = "{...}" if key in ("env", "secret_env") else value
            ctx.note(f"{what}: workload.{key}: {shown}")
    if not changes:
        ctx.note(f"{what}: the workload already says that")
    elif any(k in _IDENTITY for k in changes):
        ctx.note("what runs changed: the controller stops the old run and starts a new one")


def restart_workload(ctx: EditContext, *, name: str) -> None:
    entry, what = _entry(ctx, name)
    spec = ctx.desired.slot(name)
    if "workload" not in entry and (spec is None or spec.workload is None):
        raise EditRejected(
            f"{what} has no workload: nothing to restart (give it one with "
            "`tpu-reconciler workload set` or set_workload)"
        )
    block = child_map(entry, "workload")
    generation = int(block.get("generation", 0)) + 1
    set_key(block, "generation", generation)
    ctx.note(
        f"{what}: workload.generation: {generation} (the controller stops it and starts a new "
        "run: new run id, attempt 1, failures 0)"
    )


def stop_workload(ctx: EditContext, *, name: str) -> None:
    entry, what = _entry(ctx, name)
    spec = ctx.desired.slot(name)
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


def changes_what_runs(args: Mapping[str, Any]) -> bool:
    """A ``set_workload`` with these arguments may start a new run (stopping the old one)."""
    return any(args.get(k) is not None for k in _IDENTITY)


def _group_has_workload(ctx: EditContext, group: str) -> bool:
    gi = group_index(ctx, group)
    return gi is not None and "workload" in ctx.root["race_groups"][gi]


EDITS: dict[str, Callable[..., None]] = {
    "set_workload": set_workload,
    "restart_workload": restart_workload,
    "stop_workload": stop_workload,
}
