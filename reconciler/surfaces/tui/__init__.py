"""``tpu-reconciler tui``: a terminal UI over the intent (Textual).

A live, k9s-style view of the controller's status snapshot with one key per action, where
every action is an edit of desired.yaml through the same ``IntentEditor`` as MCP and the CLI
verbs (validated, comment-preserving, op-id'd, audited). The TUI never calls the cloud: it
reads the snapshot the controller writes and re-renders when it changes.

Private modules: ``_app`` (the application), ``_widgets`` (table and dialogs), ``_keys``
(which edit each key asks for, pure), ``_frame`` (what a screen shows, as values),
``_clipboard`` (OSC 52 fallbacks), ``_logs`` (the logs pane's source), ``_key_actions``
(the result line and each key's action: proposing, confirming and applying its edit),
``_panes`` (the bottom pane: switching it and filling it on workers), ``_timeline`` (the
timeline pane). Textual is imported only here and below, never on another command's path.
"""

from __future__ import annotations

import shlex
from pathlib import Path


def start_command(file: Path, state_dir: Path | None) -> str:
    """The command the no-controller banner tells the user to run."""
    argv = ["tpu-reconciler", "--file", str(file)]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    return shlex.join([*argv, "run"])


def main(
    file: Path, state_dir: Path | None, *, theme: str = "dark", owner: str | None = None
) -> int:
    from reconciler.intent.store import state_dir as state_of
    from reconciler.surfaces.tui._app import TpuApp
    from reconciler.surfaces.tui._logs import default_source

    state = state_of(file, state_dir)
    app = TpuApp(
        file,
        state,
        start_command=start_command(file, state_dir),
        log_source=default_source(file, state),
        theme=f"textual-{theme}",
        owner=owner,
    )
    return app.run() or 0
