"""``tpu-mcp`` (also ``tpu-reconciler mcp``): the MCP server, stdio only.

Thin: each tool validates nothing itself and calls ``reconciler.intent.engine`` (edits of
desired.yaml) or ``reconciler.intent.views`` (reads of desired.yaml and the controller's
snapshot). Tools never act on the cloud: the controller does, on its next pass. The one direct
action is ``tmux_close`` (local: closes a tmux window). Errors a user must read are raised as
``ToolError``. Nothing is written to stdout (it carries the protocol); logs go to stderr.

Results are dicts with ``schema_version`` ``tpu-reconciler.mcp.v1``. Edits take an optional
``operation_id``: an identical retry returns the first result with ``status: "exists"``; the
same id for a different edit is refused; without one the edit gets a fresh id (in the result)
and is not deduplicated. See docs/mcp.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from reconciler import __version__
from reconciler.adapters.statedir import StateDir, default_state_dir
from reconciler.errors import NeedsConfirmation, ReconcilerError
from reconciler.exitcodes import EX_INTERRUPTED, EX_OK
from reconciler.intent import views
from reconciler.intent.engine import Edit, IntentEditor
from reconciler.intent.tmux import REOPEN_NOTE, close_window, stays_open_notes
from reconciler.model.names import check_accelerator

T = TypeVar("T")
log = logging.getLogger("reconciler.mcp")

REMINDER: Final = (
    "desired.yaml is edited; the controller acts on it at its next pass "
    "(pass wait_seconds to wait for it, or call list_slots / events later)"
)
INSTRUCTIONS: Final = (
    "Cloud TPU slots held declaratively. Read with list_slots, slot_info, plan, events. "
    "Edits change desired.yaml only (the controller acts). Give each a fresh operation_id "
    "to make a retry safe (the same id again returns the first result; omitted, each call "
    "is a new edit). cancel_slot, remove_slot, set_race_group "
    "(when it drops candidates or lowers a count), tmux_close, confirm_deletes, and "
    "restart_workload / stop_workload of a running workload need confirm=true: ask the user "
    "first. suspend / resume stop and restart the controller's actions."
)

READ: Final = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
EDIT: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# Edits that do it again when repeated (a new slot, another setup run, another restart):
# idempotent only through a repeated operation_id, which is optional.
EDIT_AGAIN: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE_AGAIN: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


def _guard(fn: Callable[[], T], hint: str = "") -> T:
    try:
        return fn()
    except NeedsConfirmation as e:
        raise ToolError(f"{e}{hint}") from None
    except ReconcilerError as e:
        raise ToolError(str(e)) from None


def _envelope(doc: dict[str, Any]) -> dict[str, Any]:
    """A CLI JSON document (``history`` / ``recommend``) under the MCP envelope; ``document``
    keeps the CLI schema it matches field for field."""
    body = {k: v for k, v in doc.items() if k != "schema_version"}
    return {"schema_version": views.SCHEMA, "document": doc["schema_version"], **body}


def _since(text: str | None) -> float | None:
    import time

    from reconciler.model.durations import parse_duration

    if text is None:
        return None
    try:
        return time.time() - parse_duration(text)
    except ValueError as e:
        raise ToolError(f"since: {e}") from None


class _Edit(Protocol):
    """Apply one intent edit for a tool and answer with the MCP result (see ``_edit_runner``)."""

    def __call__(
        self,
        kind: str,
        operation_id: str | None = None,
        wait_seconds: float = 0,
        *,
        confirmed: bool = False,
        hint: str = "",
        **args: Any,
    ) -> dict[str, Any]: ...


def _edit_runner(store: IntentEditor) -> _Edit:
    """The one way a tool edits desired.yaml: ``store.apply`` under ``_guard``, the result with
    the schema version and the reminder, and the optional wait for the controller."""

    def edit(
        kind: str,
        operation_id: str | None = None,
        wait_seconds: float = 0,
        *,
        confirmed: bool = False,
        hint: str = "",
        **args: Any,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            result = store.apply(
                Edit(kind, args), source="mcp", operation_id=operation_id, confirmed=confirmed
            )
            out: dict[str, Any] = {
                "schema_version": views.SCHEMA,
                **result.to_dict(),
                "reminder": REMINDER,
            }
            if wait_seconds > 0:
                out["wait"] = views.wait_for(store, result, wait_seconds)
            return out

        return _guard(run, hint)

    return edit


def build_server(store: IntentEditor) -> MCPServer:
    """The server with every tool; each group of tools registers itself (a new feature adds
    its own ``_register_<feature>_tools(server, store)`` and one call here)."""
    server = MCPServer(
        "tpu-reconciler", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    _register_read_tools(server, store)
    _register_edit_tools(server, store)
    _register_setup_tools(server, store)
    _register_tmux_tools(server, store)
    _register_workload_tools(server, store)
    _register_control_tools(server, store)
    return server


def _register_read_tools(server: MCPServer, store: IntentEditor) -> None:
    """Reads of desired.yaml and the controller's snapshot: never a change."""

    @server.tool(annotations=READ)
    def list_slots() -> dict[str, Any]:
        """Every slot: desired intent (want, race group, setup flags) joined with what the
        controller last observed (state, IPs, setup, tmux) and the snapshot's age. Without a
        snapshot, desired only (and says so). Unmanaged TPUs (not in the file) are listed too."""
        return _guard(lambda: views.list_slots(store))

    @server.tool(annotations=READ)
    def slot_info(name: str) -> dict[str, Any]:
        """One slot in detail: IPs, create time, setup state, last error, tmux window and the
        SSH command for worker 0."""
        return _guard(lambda: views.slot_info(store, name))

    @server.tool(annotations=READ)
    def ssh_command(name: str, worker: int = 0) -> dict[str, Any]:
        """An OpenSSH command line for one worker of the slot's node, pinned to the node
        instance's host key in the state directory's known_hosts."""
        return _guard(lambda: views.ssh_command(store, name, worker))

    @server.tool(annotations=READ)
    def plan() -> dict[str, Any]:
        """What the controller will do next (its last plan: actions, deferred, blocked)."""
        return _guard(lambda: views.plan(store))

    @server.tool(annotations=READ)
    def events(limit: int = 50) -> dict[str, Any]:
        """The controller's latest events (transitions, actions, results, errors)."""
        return _guard(lambda: views.events(store, limit))

    @server.tool(annotations=READ)
    def capacity_history(
        zone: str | None = None,
        accelerator: str | None = None,
        mode: str | None = None,
        since: str | None = None,
    ) -> dict[str, Any]:
        """Capacity history per (zone, accelerator, mode): samples, p50/p90 time from queued
        to PROVISIONING and to ACTIVE, median lifetime before preemption, preemptions per day
        held, failures by code, queue closed. since: e.g. "7d" (default: everything kept)."""
        from reconciler.runtime.history import history_document

        cutoff = _since(since)
        return _envelope(
            _guard(
                lambda: history_document(
                    store.state.history,
                    zone=zone,
                    accelerator=accelerator,
                    mode=mode,
                    since=cutoff,
                )
            )
        )

    @server.tool(annotations=READ)
    def recommend_zones(
        accelerator: str, mode: str = "spot", count: int = 3, since: str | None = None
    ) -> dict[str, Any]:
        """Zones for an accelerator (e.g. "v6e-8") ranked by expected time to capacity from
        the history, with sample counts; closed queues left out; a race group to paste.
        To use it, add the slots and race group with add_slot / set_race_group."""
        from reconciler.runtime.history import recommend_document

        try:
            check_accelerator(accelerator)
        except ReconcilerError as e:
            raise ToolError(str(e)) from None
        cutoff = _since(since)
        return _envelope(
            _guard(
                lambda: recommend_document(
                    store.state.history, accelerator, mode=mode, count=count, since=cutoff
                )
            )
        )


def _register_edit_tools(server: MCPServer, store: IntentEditor) -> None:
    """Intent edits of slots and race groups (want, membership, the file's slot list, polling)."""
    edit = _edit_runner(store)

    @server.tool(annotations=EDIT)
    def queue_slot(
        name: str, operation_id: str | None = None, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Hold a slot (want: held): the controller queues it and keeps it. A race candidate
        leaves its group (the group keeps racing for its other winners). wait_seconds: wait
        until it is ACTIVE."""
        return edit("hold", operation_id, wait_seconds, name=name)

    @server.tool(annotations=EDIT)
    def queue_slots(
        names: list[str],
        operation_id: str | None = None,
        race: bool = False,
        count: int = 1,
        group: str | None = None,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Hold several slots; with race=true make them candidates of a race group instead
        (first `count` to win are kept, the rest cancelled). The group is `group`, else the
        one these slots already race in, else `race-<first name>`; existing candidates stay.
        wait_seconds: wait until held (or the group has its winners)."""
        if not race:
            return edit("hold_many", operation_id, wait_seconds, names=list(names))
        chosen = group or _group_for(store, names)
        return edit(
            "race", operation_id, wait_seconds, group=chosen, slots=list(names), count=count,
            exact=False, hint=" (queue_slots never does that: use set_race_group)",
        )  # fmt: skip

    @server.tool(annotations=DESTRUCTIVE)
    async def cancel_slot(
        name: str,
        operation_id: str | None = None,
        confirm: bool = False,
        close_tmux: bool = False,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Release a slot (want: released): the controller deletes its queued resource and
        TPU. Needs confirm=true (ask the user). A race candidate leaves its group. The tmux
        window stays open unless close_tmux=true. wait_seconds: wait until NOT_QUEUED."""
        # Unconfirmed, the edit itself refuses (after checking the slot exists) and asks.
        out = await anyio.to_thread.run_sync(
            lambda: edit(
                "release", operation_id, wait_seconds, confirmed=confirm, name=name,
                hint=" (ask the user first)",
            )
        )  # fmt: skip
        if close_tmux:
            out["tmux_closed"] = await _close_window(store, name)
        else:
            out.setdefault("notes", []).extend(await stays_open_notes(store, name))
        return out

    @server.tool(annotations=EDIT_AGAIN)
    def add_slot(
        zone: str,
        accelerator: str,
        operation_id: str | None = None,
        mode: str | None = None,
        name: str | None = None,
        want: str = "held",
        index: int | None = None,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Add a slot. Without a name it is named <mode>-<accelerator>-<zone code>-<index>
        (e.g. spot-v6e8-ew4a-1), with the first free index unless `index` is given."""
        return edit(
            "add_slot", operation_id, wait_seconds, zone=zone, accelerator=accelerator,
            mode=mode, name=name, want=want, index=index,
        )  # fmt: skip

    @server.tool(annotations=DESTRUCTIVE)
    def set_race_group(
        group: str,
        slots: list[str],
        count: int,
        operation_id: str | None = None,
        confirm: bool = False,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Create or replace a race group: exactly these candidates, `count` winners. Dropped
        candidates get want: released and lowering the count cancels extra winners: both
        need confirm=true. wait_seconds: wait until the group has its winners."""
        return edit(
            "race", operation_id, wait_seconds, confirmed=confirm, group=group,
            slots=list(slots), count=count, exact=True,
        )  # fmt: skip

    @server.tool(annotations=DESTRUCTIVE)
    def remove_slot(
        name: str, operation_id: str | None = None, confirm: bool = False, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Remove a slot from desired.yaml: it becomes UNMANAGED (its TPU, if any, is shown
        and never deleted — unless settings.prune is on, which needs confirm=true)."""
        return edit("remove_slot", operation_id, wait_seconds, confirmed=confirm, name=name)

    @server.tool(annotations=EDIT)
    def set_poll(
        operation_id: str | None = None,
        interval: str | None = None,
        fast_interval: str | None = None,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Change how often the controller polls: interval when steady, fast_interval while
        anything moves ('30s', '2m', or seconds)."""
        return edit(
            "set_poll", operation_id, wait_seconds, interval=interval, fast_interval=fast_interval
        )


def _register_setup_tools(server: MCPServer, store: IntentEditor) -> None:
    """Intent edits that (re)run node setup: bootstrap scripts, Tailscale."""
    edit = _edit_runner(store)

    @server.tool(annotations=EDIT_AGAIN)
    def setup_vm(
        name: str, operation_id: str | None = None, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Run the setup scripts on the slot's node: bootstrap on and the setup generation
        bumped, so it runs again even if it ran before. wait_seconds: wait until done."""
        return edit("setup", operation_id, wait_seconds, name=name, bootstrap=True, rerun=True)

    @server.tool(annotations=EDIT_AGAIN)
    def tailscale_setup(
        name: str, operation_id: str | None = None, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Join the slot's node to the tailnet: tailscale on, setup generation bumped."""
        return edit("setup", operation_id, wait_seconds, name=name, tailscale=True, rerun=True)


def _register_tmux_tools(server: MCPServer, store: IntentEditor) -> None:
    """The tmux mirror: its state, the edits that turn it on, and closing a window now."""
    edit = _edit_runner(store)

    @server.tool(annotations=READ)
    def tmux_status() -> dict[str, Any]:
        """tmux windows the controller mirrors (one per ACTIVE slot); orphans (window whose
        slot is not ACTIVE) are flagged and left open."""
        return _guard(lambda: views.tmux_status(store))

    @server.tool(annotations=EDIT)
    def tmux_sync(operation_id: str | None = None, wait_seconds: float = 0) -> dict[str, Any]:
        """Mirror every ACTIVE slot in tmux: defaults.setup.tmux on. Slots that say
        `tmux: false` themselves keep it (listed in notes; tmux_open turns one on)."""
        return edit("tmux_all", operation_id, wait_seconds)

    @server.tool(annotations=EDIT)
    def tmux_open(
        name: str, operation_id: str | None = None, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Keep a tmux SSH window open to the slot's worker 0 (setup.tmux: true)."""
        return edit("setup", operation_id, wait_seconds, name=name, tmux=True)

    @server.tool(annotations=DESTRUCTIVE)
    async def tmux_close(name: str, confirm: bool = False) -> dict[str, Any]:
        """Close the slot's tmux window(s) now (a local action, not an edit). Needs
        confirm=true. The controller reopens it while the slot is ACTIVE with tmux on."""
        if not confirm:
            raise ToolError(
                f"tmux_close ends whatever runs in {name}'s window: ask the user, then call "
                "again with confirm=true"
            )
        return {"schema_version": views.SCHEMA, **await _close_window(store, name)}


def _register_control_tools(server: MCPServer, store: IntentEditor) -> None:
    """suspend / resume (edits of settings.suspend) and confirm_deletes (the delete guard)."""
    edit = _edit_runner(store)

    @server.tool(annotations=EDIT)
    def suspend(operation_id: str | None = None, wait_seconds: float = 0) -> dict[str, Any]:
        """Suspend the controller (settings.suspend: true): it keeps observing, planning and
        reporting, and takes no action at all (no create, delete, setup or tmux) until resume."""
        return edit("suspend", operation_id, wait_seconds)

    @server.tool(annotations=EDIT)
    def resume(operation_id: str | None = None, wait_seconds: float = 0) -> dict[str, Any]:
        """Resume a suspended controller (settings.suspend: false): it acts on its plan again.
        Check `plan` first: what it shows is what happens."""
        return edit("resume", operation_id, wait_seconds)

    @server.tool(annotations=DESTRUCTIVE)
    def confirm_deletes(confirm: bool = False, fingerprint: str | None = None) -> dict[str, Any]:
        """Let through the deletes the delete guard holds (more ACTIVE TPUs than
        settings.delete_guard at once): exactly the set `plan` shows under guard. Needs
        confirm=true (ask the user). Pass the fingerprint shown to refuse if it changed."""
        if not confirm:
            raise ToolError(
                "confirm_deletes lets the controller delete running TPUs: show the user the "
                "guarded deletes (plan), then call again with confirm=true"
            )
        from reconciler.intent.confirm import confirm_deletes as confirm_now

        return {"schema_version": views.SCHEMA, **_guard(lambda: confirm_now(store, fingerprint))}


#: The most lines ``workload_logs`` returns per call.
MAX_LOG_LINES: Final = 500


def _register_workload_tools(server: MCPServer, store: IntentEditor) -> None:
    """workload_status / workload_logs (read) and set / restart / stop_workload (edits)."""
    from reconciler.intent import workload_views

    edit = _edit_runner(store)

    def ends_live(name: str, confirm: bool, what: str) -> None:
        if not confirm and _guard(lambda: workload_views.live(store, name)):
            raise ToolError(
                f"{what} ends {name}'s running workload: ask the user, then call again with "
                "confirm=true"
            )

    @server.tool(annotations=READ)
    def workload_status(name: str) -> dict[str, Any]:
        """A slot's (or race group's candidates') workload: what the file declares (secret_env
        shows secret names only) and what the controller last saw: state (pending, starting,
        running, succeeded, failed, stopping, interrupted, gave-up, unknown), run_id, attempt,
        failures / max_failures, since, and each worker's state and exit code."""
        return _guard(lambda: workload_views.workload_status(store, name))

    @server.tool(annotations=READ)
    async def workload_logs(
        name: str, worker: int | None = None, lines: int = 100
    ) -> dict[str, Any]:
        """The last `lines` (at most 500) lines of the slot's workload output on each of its
        workers (as `tpu-reconciler logs --lines`), each with its worker and attempt; `worker`
        for one worker only."""
        if not 0 <= lines <= MAX_LOG_LINES:
            raise ToolError(f"lines must be between 0 and {MAX_LOG_LINES}")
        if worker is not None and worker < 0:
            raise ToolError("worker counts from 0")
        return await _workload_logs(store, name, worker, lines)

    @server.tool(annotations=EDIT)
    def set_workload(
        name: str,
        operation_id: str | None = None,
        command: str | list[str] | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        secret_env: dict[str, str] | None = None,
        restart: str | None = None,
        max_failures: int | None = None,
        stall_after: str | None = None,
        stop_grace: str | None = None,
        when_done: str | None = None,
        confirm: bool = False,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Set fields of the workload: block of a slot or race group (others stay as they
        are; env and secret_env replace the whole mapping). command: a string run by bash -lc
        on every worker, or an argv list. secret_env maps ENV_NAME to a secret-store name (set
        with `tpu-reconciler secret set`), never a value. restart: never, on-preemption,
        on-failure, always. when_done: keep or release. Changing what runs (command, workdir,
        env, secret_env) of a running workload restarts it and needs confirm=true."""
        args: dict[str, Any] = {
            "command": command, "workdir": workdir, "env": env, "secret_env": secret_env,
            "restart": restart, "max_failures": max_failures, "stall_after": stall_after,
            "stop_grace": stop_grace, "when_done": when_done,
        }  # fmt: skip
        from reconciler.intent.edits_workload import changes_what_runs

        if changes_what_runs(args):
            ends_live(name, confirm, "changing what runs")
        return edit("set_workload", operation_id, wait_seconds, name=name, **args)

    @server.tool(annotations=DESTRUCTIVE_AGAIN)
    def restart_workload(
        name: str, operation_id: str | None = None, confirm: bool = False, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Restart a slot's (or race group's) workload deliberately: a generation bump, so the
        running attempt is stopped (SIGTERM, then SIGKILL) and a new run starts (new run id,
        attempt 1, failures 0) — also after it gave up. Needs confirm=true while it runs."""
        ends_live(name, confirm, "restart_workload")
        return edit("restart_workload", operation_id, wait_seconds, name=name)

    @server.tool(annotations=DESTRUCTIVE)
    def stop_workload(
        name: str, operation_id: str | None = None, confirm: bool = False, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """Stop a slot's (or race group's) workload: its workload: block is removed, the
        controller stops the program and forgets it (set_workload brings it back). Needs
        confirm=true while it runs."""
        ends_live(name, confirm, "stop_workload")
        return edit("stop_workload", operation_id, wait_seconds, name=name)


async def _workload_logs(
    store: IntentEditor, name: str, worker: int | None, lines: int
) -> dict[str, Any]:
    """Logs through the controller's own runner wiring (same SSH user, key, pins)."""
    from reconciler.runtime.setup import LiveSetup
    from reconciler.surfaces.cli._logs import target_of

    snap = _guard(lambda: views.read_snapshot(store))
    target = target_of(snap, name)
    if target.node is None:
        raise ToolError(target.reason or f"{name}: no node to read logs from")
    desired = _guard(lambda: store.parse(store.read().decode("utf-8", "replace")))
    live = LiveSetup(store.path, store.state)
    out: list[dict[str, Any]] = []
    try:
        runner = await live.workload_runner(desired.settings)
        stream = runner.logs(
            target.node, name, worker=worker, attempt=None, lines=lines, follow=False,
            run_id=target.run_id,
        )  # fmt: skip
        async for line in stream:
            out.append({"worker": line.worker, "attempt": line.attempt, "text": line.text})
    except ReconcilerError as e:
        raise ToolError(str(e)) from None
    finally:
        await live.aclose()
    return {
        "schema_version": views.SCHEMA,
        "name": name,
        "run_id": target.run_id,
        "lines": out,
    }


def _group_for(store: IntentEditor, names: Sequence[str]) -> str:
    """The race group ``names`` already share, else ``race-<first name>``."""
    desired = _guard(lambda: store.parse(store.read().decode("utf-8", "replace")))
    groups = {s.race_group for n in names if (s := desired.slot(n)) is not None}
    if len(groups) == 1 and None not in groups:
        return str(groups.pop())
    first = names[0] if names else "slots"
    return f"race-{first}"[:63].rstrip("-")


async def _close_window(store: IntentEditor, name: str) -> dict[str, Any]:
    try:
        closed = await close_window(store, name)
    except ReconcilerError as e:
        raise ToolError(str(e)) from None
    return {"closed": closed, "note": REOPEN_NOTE if closed else "no window was open"}


def serve(file: Path, state_dir: Path | None = None, *, verbose: int = 0) -> int:
    """Run the server on stdio until the client closes it."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING,
    )
    root = state_dir if state_dir is not None else default_state_dir(file)
    store = IntentEditor(file, StateDir(root))
    log.info("serving %s (state %s)", store.path, root)
    build_server(store).run("stdio")
    return EX_OK


def main(argv: Sequence[str] | None = None) -> int:
    from reconciler.surfaces.cli import _global_options  # the same --file / --state-dir

    parser = argparse.ArgumentParser(
        prog="tpu-mcp", description="MCP server (stdio) for tpu-reconciler's desired.yaml"
    )
    _global_options(parser)
    args = parser.parse_args(argv)
    try:
        return serve(args.file, args.state_dir, verbose=args.verbose)
    except KeyboardInterrupt:
        return EX_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
