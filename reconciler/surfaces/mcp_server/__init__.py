"""``tpu-mcp`` (also ``tpu-reconciler mcp``): the MCP server, stdio only.

Thin: each tool validates nothing itself and calls ``reconciler.intent.engine`` (edits of
desired.yaml) or ``reconciler.intent.views`` (reads of desired.yaml and the controller's
snapshot). Tools never act on the cloud: the controller does, on its next pass. The one direct
action is ``tmux_close`` (local: closes a tmux window). Errors a user must read are raised as
``ToolError``. Nothing is written to stdout (it carries the protocol); logs go to stderr.

One module per group of tools, as the CLI has ``cli/_<group>.py``, each with
``register(server, store)``:

    _read       status, info, ssh, last_plan, events, history, recommend
    _slots      hold, queue_slots, release, add_slot, race, remove_slot, set_poll
    _setup      setup_vm, tailscale_setup
    _tmux       tmux_status, tmux_sync, tmux_open, tmux_close
    _workload   workload_status, logs, workload_set, workload_restart, workload_stop
    _control    suspend, resume, confirm
    _quota      quota
    _timeline   timeline
    _common     what they share; ``case_tool`` makes an edit tool from its use case
                (``reconciler.intent.usecases``: name, deprecated aliases, annotations) and its
                parameters from its edit class, so they are never copied by hand;
                ``declared_tools`` makes the tool of every declared edit no group wrote a body
                for (a new edit needs no line here)
    _protocol   the ``Server``: unknown tools and arguments refused by name, missing and
                wrong arguments in one line, malformed JSON-RPC answered with its error

Each tool's name is its use case's (``reconciler.intent.usecases``); an older name still
answers as a deprecated alias for one release (docs/mcp.md lists them).

Results are dicts with ``schema_version`` ``tpu-reconciler.mcp.v1``. Edits take an optional
``operation_id``: an identical retry returns the first result with ``status: "exists"``; the
same id for a different edit is refused; without one the edit gets a fresh id (in the result)
and is not deduplicated. See docs/mcp.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from mcp.server.mcpserver import MCPServer

from reconciler import __version__
from reconciler.exitcodes import EX_INTERRUPTED, EX_OK
from reconciler.intent.engine import IntentEditor
from reconciler.intent.store import open_store
from reconciler.surfaces._options import global_options
from reconciler.surfaces.mcp_server import (
    _control,
    _quota,
    _read,
    _setup,
    _slots,
    _timeline,
    _tmux,
    _workload,
)
from reconciler.surfaces.mcp_server._common import declared_tools
from reconciler.surfaces.mcp_server._protocol import Server

log = logging.getLogger("reconciler.mcp")

INSTRUCTIONS: Final = (
    "Cloud TPU slots held declaratively. Read with status, info, last_plan, events. "
    "Edits change desired.yaml only (the controller acts). Give each a fresh operation_id "
    "to make a retry safe (the same id again returns the first result; omitted, each call "
    "is a new edit). release, remove_slot, race "
    "(when it drops candidates or lowers a count), tmux_close, confirm, and "
    "workload_restart / workload_stop of a running workload need confirm=true: ask the user "
    "first. suspend / resume stop and restart the controller's actions."
)
#: The tool groups, in the order their tools are listed.
GROUPS: Final = (_read, _slots, _setup, _tmux, _workload, _control, _quota, _timeline)


def build_server(store: IntentEditor) -> MCPServer:
    """The server with every tool; each group of tools registers itself (a new feature adds
    its own ``_<feature>.py`` with ``register(server, store)`` and one entry in ``GROUPS``)."""
    server = Server(
        "tpu-reconciler", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    for group in GROUPS:
        group.register(server, store)
    declared_tools(server, store, server.tool_names())
    return server


def serve(file: Path, state_dir: Path | None = None, *, verbose: int = 0) -> int:
    """Run the server on stdio until the client closes it."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING,
    )
    store = open_store(file, state_dir)
    log.info("serving %s (state %s)", store.path, store.state.root)
    build_server(store).run("stdio")
    return EX_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tpu-mcp", description="MCP server (stdio) for tpu-reconciler's desired.yaml"
    )
    global_options(parser)  # the same --file / --state-dir as tpu-reconciler
    args = parser.parse_args(argv)
    try:
        return serve(args.file, args.state_dir, verbose=args.verbose)
    except KeyboardInterrupt:
        return EX_INTERRUPTED
