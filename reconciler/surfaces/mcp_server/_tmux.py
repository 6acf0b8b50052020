"""MCP tools of the tmux mirror: its state, the edits that turn it on, and closing a window
now (``tmux_close``: a local action, not an edit)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from reconciler.intent import views
from reconciler.intent.edits import Setup, TmuxAll
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import (
    EditCall,
    case_tool,
    close_tmux_window,
    guard,
    own_tool,
)


def register(server: MCPServer, store: IntentEditor) -> None:
    @own_tool(server, by_name("tmux_status"))
    def tmux_status() -> dict[str, Any]:
        """tmux windows the controller mirrors (one per ACTIVE slot); orphans (window whose
        slot is not ACTIVE) are flagged and left open."""
        return guard(lambda: views.tmux_status(store))

    @case_tool(server, store, by_name("tmux_sync"))
    def tmux_sync(call: EditCall[TmuxAll]) -> dict[str, Any]:
        """Mirror every ACTIVE slot in tmux: defaults.setup.tmux on. Slots that say
        `tmux: false` themselves keep it (listed in notes; tmux_open turns one on)."""
        return call.apply()

    @case_tool(server, store, by_name("tmux_open"))
    def tmux_open(call: EditCall[Setup]) -> dict[str, Any]:
        """Keep a tmux SSH window open to the slot's worker 0 (setup.tmux: true)."""
        return call.apply()

    @own_tool(server, by_name("tmux_close"))
    async def tmux_close(name: str, confirm: bool = False) -> dict[str, Any]:
        """Close the slot's tmux window(s) now (a local action, not an edit). Needs
        confirm=true. The controller reopens it while the slot is ACTIVE with tmux on."""
        if not confirm:
            raise ToolError(
                f"tmux_close ends whatever runs in {name}'s window: ask the user, then call "
                "again with confirm=true"
            )
        return {"schema_version": views.SCHEMA, **await close_tmux_window(store, name)}
