"""MCP tools of workloads: ``workload_status`` / ``logs`` (read) and
``workload_set`` / ``workload_restart`` / ``workload_stop`` (edits, their parameters from
``SetWorkload``, ``RestartWorkload`` and ``StopWorkload``; the CLI's ``workload set|restart|stop``,
their old names ``set_workload`` ... deprecated aliases). An edit that ends a program the
controller's snapshot shows running needs ``confirm=true``."""

from __future__ import annotations

from typing import Any, Final

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from reconciler.errors import ReconcilerError
from reconciler.intent import views, workload_views
from reconciler.intent.edits_workload import RestartWorkload, SetWorkload, StopWorkload
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import EditCall, case_tool, guard, own_tool

#: The most lines ``logs`` returns per call.
MAX_LOG_LINES: Final = 500


def register(server: MCPServer, store: IntentEditor) -> None:
    def ends_live(name: str, confirm: bool, what: str) -> None:
        if not confirm and guard(lambda: workload_views.live(store, name)):
            raise ToolError(
                f"{what} ends {name}'s running workload: ask the user, then call again with "
                "confirm=true"
            )

    @own_tool(server, by_name("workload_status"))
    def workload_status(name: str) -> dict[str, Any]:
        """A slot's (or race group's candidates') workload: what the file declares (secret_env
        shows secret names only) and what the controller last saw: state (pending, starting,
        running, succeeded, failed, stopping, interrupted, gave-up, released, not-started,
        unknown), run_id, attempt,
        failures / max_failures, since, and each worker's state and exit code."""
        return guard(lambda: workload_views.workload_status(store, name))

    @own_tool(server, by_name("logs"))
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

    @case_tool(server, store, by_name("workload_set"))
    def workload_set(call: EditCall[SetWorkload]) -> dict[str, Any]:
        """Set fields of the workload: block of a slot or race group (others stay as they
        are; env and secret_env replace the whole mapping). command: a string run by bash -lc
        on every worker, or an argv list. secret_env maps ENV_NAME to a secret-store name (set
        with `tpu-reconciler secret set`), never a value. restart: never, on-preemption,
        on-failure, always. when_done: keep or release. Changing what runs (command, workdir,
        env, secret_env) of a running workload restarts it and needs confirm=true."""
        if call.edit.changes_what_runs:
            ends_live(call.edit.name, call.confirmed, "changing what runs")
        return call.apply()

    @case_tool(server, store, by_name("workload_restart"))
    def workload_restart(call: EditCall[RestartWorkload]) -> dict[str, Any]:
        """Restart a slot's (or race group's) workload deliberately: a generation bump, so the
        running attempt is stopped (SIGTERM, then SIGKILL) and a new run starts (new run id,
        attempt 1, failures 0) — also after it gave up. Needs confirm=true while it runs."""
        ends_live(call.edit.name, call.confirmed, "workload_restart")
        return call.apply()

    @case_tool(server, store, by_name("workload_stop"))
    def workload_stop(call: EditCall[StopWorkload]) -> dict[str, Any]:
        """Stop a slot's (or race group's) workload: its workload: block is removed, the
        controller stops the program and forgets it (workload_set brings it back). Needs
        confirm=true while it runs."""
        ends_live(call.edit.name, call.confirmed, "workload_stop")
        return call.apply()


async def _workload_logs(
    store: IntentEditor, name: str, worker: int | None, lines: int
) -> dict[str, Any]:
    """The logs use case (``intent.workload_logs``), its refusals as tool errors."""
    from reconciler.intent.workload_logs import tail

    try:
        doc = await tail(store, name, worker=worker, lines=lines)
    except ReconcilerError as e:
        raise ToolError(str(e)) from None
    return {"schema_version": views.SCHEMA, **doc}
