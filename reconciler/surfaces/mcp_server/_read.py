"""MCP tools that read desired.yaml, the controller's snapshot and the capacity history:
never a change."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from reconciler.errors import ReconcilerError
from reconciler.intent import history_views, views
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.model.names import check_accelerator
from reconciler.surfaces.mcp_server._common import guard, own_tool


def _envelope(doc: dict[str, Any]) -> dict[str, Any]:
    """A CLI JSON document (``history`` / ``recommend``) under the MCP envelope; ``document``
    keeps the CLI schema it matches field for field."""
    body = {k: v for k, v in doc.items() if k != "schema_version"}
    return {"schema_version": views.SCHEMA, "document": doc["schema_version"], **body}


def _api(api: str | None) -> str | None:
    """The ``api`` argument, checked: "tpu", "compute" or none (every API)."""
    from reconciler.model.accelerators import APIS

    if api is not None and api not in APIS:
        raise ToolError(f"api: expected {' or '.join(APIS)}, not {api!r}")
    return api


def _since(text: str | None) -> float | None:
    import time

    from reconciler.model.durations import parse_duration

    if text is None:
        return None
    try:
        return time.time() - parse_duration(text)
    except ValueError as e:
        raise ToolError(f"since: {e}") from None


def register(server: MCPServer, store: IntentEditor) -> None:
    @own_tool(server, by_name("status"))
    def list_slots(owner: str | None = None) -> dict[str, Any]:
        """Every slot: desired intent (want, race group, setup flags, owner) joined with what
        the controller last observed (state, IPs, setup, tmux) and the snapshot's age. Without a
        snapshot, desired only (and says so). Unmanaged TPUs (not in the file) are listed too.
        ``owner``: only the slots that Unix user holds, and their race groups."""
        return guard(lambda: views.list_slots(store, owner))

    @own_tool(server, by_name("info"))
    def slot_info(name: str) -> dict[str, Any]:
        """One slot in detail: IPs, create time, setup state, last error, tmux window and the
        SSH command for worker 0. Given a race group's name: the group (``kind:
        race_group``), with its one program under ``workload.across: group``."""
        return guard(lambda: views.slot_info(store, name))

    @own_tool(server, by_name("ssh"))
    def ssh_command(name: str, worker: int = 0) -> dict[str, Any]:
        """An OpenSSH command line for one worker of the slot's node, pinned to the node
        instance's host key in the state directory's known_hosts."""
        return guard(lambda: views.ssh_command(store, name, worker))

    @own_tool(server, by_name("last_plan"))
    def last_plan() -> dict[str, Any]:
        """What the controller will do next (its last plan: actions, deferred, blocked)."""
        return guard(lambda: views.plan(store))

    @own_tool(server, by_name("events"))
    def events(limit: int = 50) -> dict[str, Any]:
        """The controller's latest events (transitions, actions, results, errors)."""
        return guard(lambda: views.events(store, limit))

    @own_tool(server, by_name("history"))
    def capacity_history(
        zone: str | None = None,
        accelerator: str | None = None,
        mode: str | None = None,
        since: str | None = None,
        api: str | None = None,
    ) -> dict[str, Any]:
        """Capacity history per (zone, accelerator, mode, api): samples, p50/p90 time from
        queued to PROVISIONING and to ACTIVE, median lifetime before preemption, preemptions
        per day held, failures by code, queue closed. since: e.g. "7d" (default: everything
        kept); api: "tpu" or "compute" (default: both)."""
        cutoff = _since(since)
        return _envelope(
            guard(
                lambda: history_views.history(
                    store,
                    zone=zone,
                    accelerator=accelerator,
                    mode=mode,
                    since=cutoff,
                    api=_api(api),
                )
            )
        )

    @own_tool(server, by_name("recommend"))
    def recommend_zones(
        accelerator: str,
        mode: str = "spot",
        count: int = 3,
        since: str | None = None,
        api: str | None = None,
    ) -> dict[str, Any]:
        """Zones for an accelerator (e.g. "v6e-8") ranked by expected time to capacity from
        the history, with sample counts; closed queues left out; a race group to paste.
        Each pick names its API (the same zone on the TPU API and on Compute Engine are two
        queues); api: "tpu" or "compute" ranks that API's only. To use it, add the slots
        (add_slot, with its api) and race group with add_slot / race."""
        try:
            check_accelerator(accelerator)
        except ReconcilerError as e:
            raise ToolError(str(e)) from None
        cutoff = _since(since)
        return _envelope(
            guard(
                lambda: history_views.recommend(
                    store, accelerator, mode=mode, count=count, since=cutoff, api=_api(api)
                )
            )
        )
