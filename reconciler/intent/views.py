"""Read-only views for MCP tools and CLI verbs: the intent joined with the controller's snapshot.

May: read desired.yaml, ``status.json`` (a ``model/status.StatusSnapshot``, read through
``adapters/status_file``; written by the controller after every pass), ``events.jsonl``,
``oslogin_user`` and probe the controller lock.
May not: write anything, call the cloud, SSH or tmux.

Every document carries ``schema_version`` ``tpu-reconciler.mcp.v1``. A missing snapshot is not
an error: the views then show the desired intent only and say so.

``format_slot_info`` puts ``slot_info``'s document into words, for the ``info`` verb and the
TUI's info pane alike (both import it from here). Given a race group's name, ``slot_info``
answers with the group (``intent/group_info``: its one program under ``workload.across``).

``wait_for`` polls the snapshot until it shows what an edit asked for (see ``target_reached``).
"""

from __future__ import annotations

import difflib
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from reconciler.adapters.status_file import read_status
from reconciler.core.ends_text import before_end_line, boot_workers
from reconciler.errors import (
    InvalidDesiredState,
    ReconcilerError,
    StatusUnreadable,
    UnsafeName,
    ViewError,
)
from reconciler.intent import group_info as groups
from reconciler.intent import ssh_view
from reconciler.intent.engine import EditResult, IntentEditor
from reconciler.model import flex, names
from reconciler.model.addresses import is_documentation_address
from reconciler.model.desired import Desired
from reconciler.model.durations import duration_text, format_duration
from reconciler.model.names import check_name
from reconciler.model.stamps import epoch_or_none
from reconciler.model.status import (
    BeforeEndStatus,
    BootStatus,
    SlotStatus,
    StatusSnapshot,
    decode_as,
    encode,
)

if TYPE_CHECKING:
    from reconciler.adapters.worker_names import WorkerNames

SCHEMA: Final = "tpu-reconciler.mcp.v1"
_TAIL_BYTES: Final = 4 * 1024 * 1024


def _doc(**fields: Any) -> dict[str, Any]:
    return {"schema_version": SCHEMA, **fields}


_parse_time = epoch_or_none


def read_snapshot(store: IntentEditor) -> StatusSnapshot | None:
    """The controller's last status snapshot, or None when it has not written one."""
    try:
        return read_status(store.state.status)
    except StatusUnreadable as e:
        raise ViewError(str(e)) from None


def _snapshot_meta(store: IntentEditor, snap: StatusSnapshot | None) -> dict[str, Any]:
    if snap is None:
        return {
            "present": False,
            "note": "no status snapshot yet (has the controller run?): desired intent only",
        }
    from reconciler.runtime.lock import read_holder

    made = _parse_time(snap.generated_at)
    pid = read_holder(store.state)
    return {
        "present": True,
        "generated_at": snap.generated_at,
        "age_seconds": round(time.time() - made, 1) if made is not None else None,
        "controller": {"running": pid is not None, "pid": pid},
        "desired_digest": snap.desired.digest,
    }


def _rows(snap: StatusSnapshot | None) -> dict[str, SlotStatus]:
    return snap.by_name() if snap else {}


def _desired(store: IntentEditor) -> tuple[Desired | None, list[str]]:
    try:
        return store.parse(store.read().decode("utf-8", "replace")), []
    except InvalidDesiredState as e:
        return None, [str(d) for d in e.diagnostics]
    except ReconcilerError as e:
        return None, [str(e)]


_OBSERVED: Final = (
    "state",
    "state_since",
    "node_state",
    "health",
    "ips",
    "create_time",
    "last_error",
    "setup",
    "tmux",
    "instance",
    "latency_ms",
    "quota",
)

#: Shown only when the snapshot has them: a flex-start run's end, the node's own signals.
_SIGNALS: Final = ("ends_at", "expired", "symptoms", "maintenance", "health_note", "before_end")


def _slot_view(spec: Any, slot: SlotStatus | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    row = encode(slot) if slot is not None else None
    if spec is not None:
        out = {
            "name": spec.name,
            "zone": spec.zone,
            "accelerator": spec.accelerator,
            "mode": spec.mode,
            "api": spec.api,
            # a race member's group decides for it: said as the TUI's table says it
            "want": f"race:{spec.race_group}" if spec.race_group else spec.want,
            "race_group": spec.race_group,
            "generated": spec.generated,
            "managed": True,
            "setup_wanted": {
                "bootstrap": spec.setup.bootstrap,
                "tailscale": spec.setup.tailscale,
                "tmux": spec.setup.tmux,
                "generation": spec.setup.generation,
                "at_boot": spec.setup.at_boot,
            },
        }
        if spec.mode == flex.MODE:  # the run's length and what follows its end
            out["flex"] = {
                "max_run_duration": duration_text(spec.max_run_seconds or 0),
                "renew": spec.renew,
            }
    elif row is not None:
        out = {k: row.get(k) for k in ("name", "zone", "accelerator", "mode", "api", "managed")}
        out["want"] = None
        out["note"] = "not in desired.yaml: unmanaged, shown but never deleted"
    out["observed"] = (
        _said_once(
            {k: row.get(k) for k in _OBSERVED}
            | {k: row[k] for k in _SIGNALS if k in row}
            | {"decided_want": row.get("want")}
        )
        if row
        else None
    )
    shown = (row.get("workload") or {}) if row else {}
    if shown.get("tpu"):  # setup.telemetry: the chips of every worker
        out["chips"] = {
            "tpu": shown["tpu"],
            "workers": [
                {"index": w.get("index"), "chips": w.get("chips") or []}
                for w in shown.get("workers") or ()
            ],
        }
    if spec is not None and spec.slices > 1:  # multislice: N slices, each slice's node below
        out["slices"] = spec.slices
    if row and row.get("slices") and out["observed"] is not None:
        out["observed"]["slices"] = row["slices"]
    return out


def _said_once(observed: dict[str, Any]) -> dict[str, Any]:
    """``setup.detail`` without the failing step's message when ``last_error`` already says
    it (a setup or tmux failure is the slot's last error): only the worker's log stays."""
    setup, error = observed.get("setup"), observed.get("last_error")
    if not isinstance(setup, dict) or not isinstance(error, str):
        return observed
    detail = setup.get("detail")
    if not isinstance(detail, str):
        return observed
    message, _, log = detail.partition("\n")
    if message not in error:
        return observed
    return {**observed, "setup": {**setup, "detail": log or None}}


def list_slots(store: IntentEditor, owner: str | None = None) -> dict[str, Any]:
    """Every slot; with ``owner``, only the slots that user holds (``intent/owners``)."""
    from reconciler.intent.owners import owned_views

    desired, errors = _desired(store)
    snap = read_snapshot(store)
    rows = _rows(snap)
    slots = [_slot_view(s, rows.get(s.name)) for s in desired.slots] if desired else []
    listed = {s["name"] for s in slots}
    slots += [_slot_view(None, r) for n, r in rows.items() if n not in listed]
    race_groups = (
        [encode(r) for r in snap.race_groups]
        if snap and snap.race_groups
        else [
            {"name": g.name, "count": g.count, "candidates": list(g.slots)}
            for g in (desired.race_groups if desired else ())
        ]
    )
    slots, race_groups = owned_views(desired, snap, slots, race_groups, owner)
    return _doc(
        file=str(store.path),
        desired_valid=desired is not None,
        desired_errors=errors,
        snapshot=_snapshot_meta(store, snap),
        slots=slots,
        race_groups=race_groups,
    )


def slot_info(store: IntentEditor, name: str) -> dict[str, Any]:
    names.check_name(name)
    desired, errors = _desired(store)
    snap = read_snapshot(store)
    row = _rows(snap).get(name)
    spec = desired.slot(name) if desired else None
    if spec is None and row is None and (group := groups.group_info(desired, snap, name)):
        return _doc(**group, desired_errors=errors, snapshot=_snapshot_meta(store, snap))
    if spec is None and row is None:
        if errors:  # the file cannot say: name what is wrong with it, not the slot
            raise ViewError(
                f"slot {name!r} is not in the snapshot, and {store.source} is invalid: "
                f"{errors[0]}" + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
            )
        known = [s.name for s in desired.slots] if desired else []
        close = difflib.get_close_matches(name, [*known, *_rows(snap)], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ViewError(f"unknown slot {name!r}: not in {store.source} nor in the snapshot{hint}")
    view = _slot_view(spec, row)
    if program := groups.candidate_program(desired, snap, spec):
        view["group_program"] = program
    owner = (spec.owner if spec is not None else None) or (row.owner if row else None)
    if owner:  # who holds it (a lab's slot; desired.yaml ``owner:``)
        view["owner"] = owner
    try:
        view["ssh"] = ssh_command(store, name, 0, desired=desired, snapshot=snap)
    except (ViewError, UnsafeName) as e:
        view["ssh"] = {"available": False, "why": str(e)}
    return _doc(
        **view, desired_errors=errors, snapshot=_snapshot_meta(store, snap), file=str(store.path)
    )


def format_slot_info(doc: Mapping[str, Any], now: float | None = None) -> str:
    """``slot_info``'s document for a person: the ``info`` verb and the TUI's info pane
    (``now``: the clock for "ends in ..."; default the time of the call)."""
    if doc.get("kind") == "race_group":
        return groups.format_group_info(doc)
    obs = doc.get("observed") or {}
    lines = [
        f"{doc.get('name')}  {doc.get('zone')}  {doc.get('accelerator')}  {doc.get('mode')}  "
        + (f"api {doc['api']}  " if doc.get("api") else "")
        + f"want {doc.get('want') or '-'}"
        + ("" if doc.get("managed", True) else "  (unmanaged)"),
        f"state {obs.get('state') or '?'}"
        + (f" since {obs['state_since']}" if obs.get("state_since") else "")
        + (f", node {obs['node_state']}" if obs.get("node_state") else "")
        + (f" ({obs['health']})" if obs.get("health") else ""),
    ]
    if doc.get("owner"):
        lines.insert(1, f"owner {doc['owner']}")
    ips = obs.get("ips") or []
    lines.append(
        "workers: " + ("  ".join(f"w{i} {ip}" for i, ip in enumerate(ips)) if ips else "none yet")
    )
    for sl in obs.get("slices") or []:  # multislice: each slice's node
        lines.append(
            f"  slice {sl.get('index')}: node {sl.get('node')} {sl.get('state') or '?'}, "
            f"{sl.get('workers')} workers" + "".join(f"  {ip}" for ip in sl.get("ips") or [])
        )
    lines += groups.program_lines(doc)  # a candidate of a group with workload.across: group
    ssh = doc.get("ssh") or {}
    lines.append(f"ssh: {ssh['command']}" if ssh.get("available") else f"ssh: {ssh.get('why')}")
    if ssh.get("available") and is_documentation_address(str(ssh.get("ip"))):
        lines.append(
            f"     (an emulated node: no machine stands behind {ssh.get('ip')}, so this "
            "command cannot connect)"
        )
    if obs.get("ends_at") or obs.get("expired"):
        lines.append(
            "flex-start run: "
            + ("ended (expired)" if obs.get("expired") else f"ends at {obs['ends_at']}")
            + flex_info_tail(doc, time.time() if now is None else now)
        )
    elif doc.get("flex"):
        started = obs.get("state") == "ACTIVE"
        when = "end time not reported yet" if started else "starts once ACTIVE"
        lines.append(f"flex-start run: {when}" + flex_info_tail(doc, 0.0))
    if obs.get("health_note"):
        lines.append(f"node signals: {obs['health_note']}")
    lines.append(f"last error: {obs.get('last_error') or '-'}")
    if isinstance(quota := obs.get("quota"), dict):  # its create waits for, or was refused, quota
        lines.append(f"quota: {quota.get('state')}: {quota.get('message')}")
    lines.append(f"created {obs.get('create_time') or '-'}   instance {obs.get('instance') or '-'}")
    setup = obs.get("setup") or {}
    if setup:
        lines.append(
            f"setup: bootstrap {setup.get('bootstrap')}, tailscale {setup.get('tailscale')}, "
            f"generation {setup.get('generation')}"
        )
        if setup.get("detail"):
            lines.append(f"  {setup['detail']}")
        if isinstance(boot := setup.get("at_boot"), dict):  # the node's boot script runs it
            shown = decode_as(BootStatus, boot)
            lines.append(f"  at boot (generation {shown.generation}): {boot_workers(shown)}")
            if shown.detail:
                lines.append(f"  {shown.detail}")
    if isinstance(ends := obs.get("before_end"), dict):
        lines.append(before_end_line(decode_as(BeforeEndStatus, ends)))
    tmux = obs.get("tmux") or {}
    if tmux.get("target"):
        lines.append(f"tmux: {tmux['target']} ({'open' if tmux.get('open') else 'not open'})")
    chips = doc.get("chips") or {}
    if chips:
        lines.append(f"chips: {chips.get('tpu')} (least busy worker)")
        for w in chips.get("workers") or ():
            lines.append(
                f"  w{w.get('index')}: " + "  ".join(map(_chip_text, w.get("chips") or ()))
            )
    return "\n".join(lines)


def flex_info_tail(doc: Mapping[str, Any], now: float) -> str:
    """After ``flex-start run: ...``: the time left, the run's length and what ``renew``
    does (``doc['flex']``, from desired.yaml)."""
    obs = doc.get("observed") or {}
    out = ""
    end = epoch_or_none(obs.get("ends_at"))
    if end is not None and not obs.get("expired") and end > now:
        out += f" (in {format_duration(end - now)})"
    elif obs.get("expired") and obs.get("ends_at"):
        out += f" at {obs['ends_at']}"
    wanted = doc.get("flex") or {}
    if not wanted:
        return out
    out += f"; max_run_duration {wanted.get('max_run_duration')}, "
    if wanted.get("renew"):
        return out + "renew: true (a new run is queued when this one ends)"
    then = "not queued again" if obs.get("expired") else "not queued again when it ends"
    return out + f"renew: false ({then}; set renew: true for a new run)"


def _chip_text(chip: Mapping[str, Any]) -> str:
    """``0 97% 28.1/32.0 GiB``; ``?`` for a figure not read."""
    duty, used, total = chip.get("duty_cycle"), chip.get("hbm_used"), chip.get("hbm_total")
    hbm = f"{used / 1024**3:.1f}/{total / 1024**3:.1f} GiB" if used is not None and total else "?"
    held = f" pids {','.join(map(str, chip['holders']))}" if chip.get("holders") else ""
    return f"{chip.get('index')} {'?' if duty is None else f'{duty:.0f}%'} {hbm}{held}"


def ssh_command(
    store: IntentEditor,
    name: str,
    worker: int = 0,
    *,
    desired: Desired | None = None,
    snapshot: StatusSnapshot | None = None,
    names: WorkerNames | None = None,
) -> dict[str, Any]:
    """An OpenSSH command line for one worker, pinned to the node instance's host key: the
    same argv as the slot's tmux window (``intent/ssh_view``). ``names``: IAP worker VM names
    looked up by the caller (else those the controller keeps)."""
    check_name(name)
    if desired is None:
        desired, _ = _desired(store)
    snap = snapshot if snapshot is not None else read_snapshot(store)
    return _doc(**ssh_view.ssh_command(store, name, worker, desired, snap, names))


def tmux_status(store: IntentEditor) -> dict[str, Any]:
    snap = read_snapshot(store)
    orphans = set(snap.tmux.orphans if snap else ())
    windows = [
        {"target": w, "orphaned": w in orphans}
        for w in (snap.tmux.windows if snap else ())
        if isinstance(w, str)
    ]
    return _doc(
        windows=windows,
        orphans=sorted(orphans),
        note="orphaned windows (slot not ACTIVE) are left open; close one with tmux_close",
        snapshot=_snapshot_meta(store, snap),
    )


def plan(store: IntentEditor) -> dict[str, Any]:
    snap = read_snapshot(store)
    return _doc(
        plan=encode(snap.plan) if snap and snap.plan else None,
        desired=encode(snap.desired) if snap else None,
        snapshot=_snapshot_meta(store, snap),
    )


def events(store: IntentEditor, limit: int = 50) -> dict[str, Any]:
    """The last ``limit`` events; a torn last line (a write in progress) is skipped."""
    limit = max(1, min(int(limit), 1000))
    path = store.state.events
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - _TAIL_BYTES)
            f.seek(start)
            raw = f.read()
    except FileNotFoundError:
        return _doc(events=[], note=f"no event log at {path} yet")
    lines = raw.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first line may be cut
    out: list[Any] = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return _doc(events=out[-limit:], count=len(out[-limit:]))


# --- waiting for the controller -------------------------------------------------------------


_RowCheck = Callable[[SlotStatus], bool]


def _setup_check(result: EditResult, desired: Desired | None) -> _RowCheck:
    args = result.args
    flags = [k for k in ("bootstrap", "tailscale") if args.get(k)]
    spec = desired.slot(result.slots[0]) if desired and result.slots else None
    generation = spec.setup.generation if spec else 0

    def setup_done(row: SlotStatus) -> bool:
        tmux_ok = not args.get("tmux") or bool(row.tmux and row.tmux.open)
        setup = row.setup
        return (
            tmux_ok
            and (setup.generation if setup else 0) >= generation
            and all(setup is not None and getattr(setup, k) == "done" for k in flags)
        )

    return setup_done


def _row_check(result: EditResult, desired: Desired | None) -> _RowCheck:
    args = result.args
    if result.kind in ("hold", "hold_many") or (
        result.kind == "add_slot" and args.get("want", "held") == "held"
    ):
        return lambda row: row.state == "ACTIVE"
    if result.kind in ("release", "add_slot"):
        return lambda row: row.state == "NOT_QUEUED"
    if result.kind == "remove_slot":
        return lambda row: row.managed is False
    if result.kind == "setup":
        return _setup_check(result, desired)
    return lambda row: True


def target_reached(
    result: EditResult, snap: StatusSnapshot, desired: Desired | None
) -> tuple[bool, list[SlotStatus]]:
    """Whether ``snap`` shows what ``result``'s edit asked for, and the rows it looked at.

    hold / add_slot(held): each slot ACTIVE (the TPU is usable). release /
    add_slot(released): NOT_QUEUED. remove_slot: shown as unmanaged (or gone). race: the group
    has ``count`` winners. setup: the flags turned on are ``done`` for the new generation (tmux:
    its window is open). tmux_all: every ACTIVE slot that wants tmux has its window. set_poll,
    suspend, resume: the controller has loaded the edited file.
    """
    rows = _rows(snap)
    if result.kind == "race":
        group = next((g for g in snap.race_groups if g.name == result.args["group"]), None)
        done = group is not None and len(group.winners) >= result.args["count"]
        return done, [rows[n] for n in result.slots if n in rows]
    if result.kind in ("set_poll", "suspend", "resume"):
        return snap.desired.digest == result.digest, []
    if result.kind == "tmux_all":
        active = [r for r in rows.values() if r.state == "ACTIVE" and r.tmux]
        wanted = [r for r in active if r.tmux and r.tmux.target]
        return all(r.tmux and r.tmux.open for r in wanted), wanted
    check = _row_check(result, desired)
    seen = [rows[n] for n in result.slots if n in rows]
    if result.kind == "remove_slot":
        return all(check(r) for r in seen), seen
    return len(seen) == len(result.slots) and all(check(r) for r in seen), seen


def wait_for(
    store: IntentEditor, result: EditResult, timeout: float, *, interval: float = 0.2
) -> dict[str, Any]:
    """Poll the snapshot (only ones written after the edit count) until the target is reached
    or ``timeout`` seconds pass; returns what was seen last either way."""
    timeout = max(0.0, min(float(timeout), 3600.0))
    desired, _ = _desired(store)
    # Snapshots stamp whole seconds: one from the edit's own second counts.
    edited_at = int(_parse_time(result.ts) or 0)
    start = time.monotonic()
    seen_mtime = -1
    rows: list[SlotStatus] = []
    generated_at = None
    while True:
        try:
            mtime = store.state.status.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = -1
        if mtime != seen_mtime:
            seen_mtime = mtime
            snap = read_snapshot(store) if mtime >= 0 else None
            made = _parse_time(snap.generated_at) if snap else None
            if snap is not None and made is not None and made >= edited_at:
                generated_at = snap.generated_at
                done, rows = target_reached(result, snap, desired)
                if done:
                    return _waited(True, start, rows, generated_at)
        if time.monotonic() - start >= timeout:
            return _waited(False, start, rows, generated_at)
        time.sleep(min(interval, max(0.0, timeout - (time.monotonic() - start))))


def _waited(
    reached: bool, start: float, rows: list[SlotStatus], generated_at: Any
) -> dict[str, Any]:
    keys = ("name", "state", *_OBSERVED[2:])
    return {
        "reached": reached,
        "waited_seconds": round(time.monotonic() - start, 2),
        "snapshot_generated_at": generated_at,
        "observed": [{k: row.get(k) for k in keys} for row in map(encode, rows)],
        **({} if reached else {"note": "not reached yet: the controller keeps working on it"}),
    }
