"""MCP tools of control over the controller: ``suspend`` / ``resume`` (edits of
``settings.suspend``) and ``confirm`` (the delete guard's confirmation, not an edit; its old
name ``confirm_deletes`` a deprecated alias)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from reconciler.intent import views
from reconciler.intent.edits_control import Resume, Suspend
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import EditCall, case_tool, guard, own_tool


def register(server: MCPServer, store: IntentEditor) -> None:
    @case_tool(server, store, by_name("suspend"))
    def suspend(call: EditCall[Suspend]) -> dict[str, Any]:
        """Suspend the controller (settings.suspend: true): it keeps observing, planning and
        reporting, and takes no action at all (no create, delete, setup or tmux) until resume."""
        return call.apply()

    @case_tool(server, store, by_name("resume"))
    def resume(call: EditCall[Resume]) -> dict[str, Any]:
        """Resume a suspended controller (settings.suspend: false): it acts on its plan again.
        Check `last_plan` first: what it shows is what happens."""
        return call.apply()

    @own_tool(server, by_name("confirm"))
    def confirm_tool(confirm: bool = False, fingerprint: str | None = None) -> dict[str, Any]:
        """Let through the deletes the delete guard holds (more ACTIVE TPUs than
        settings.delete_guard at once): exactly the set `plan` shows under guard. Needs
        confirm=true (ask the user). Pass the fingerprint shown to refuse if it changed."""
        if not confirm:
            raise ToolError(
                "confirm lets the controller delete running TPUs: show the user the "
                "guarded deletes (plan), then call again with confirm=true"
            )
        from reconciler.intent.confirm import confirm_deletes as confirm_now

        return {"schema_version": views.SCHEMA, **guard(lambda: confirm_now(store, fingerprint))}
