"""``release``'s note about tmux windows left open asks tmux only when a server can be there:
with no socket file, tmux would answer "no windows" after libtmux's import and a run of tmux
(the case with a server is ``tests/integration/test_mcp_tmux.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CODE = """
import asyncio, sys
from pathlib import Path
from reconciler.adapters.statedir import StateDir
from reconciler.intent.engine import IntentEditor
from reconciler.intent.tmux import stays_open_notes, tmux_may_run
store = IntentEditor(Path(sys.argv[1]), StateDir(Path(sys.argv[2])), env={})
print(tmux_may_run(store), asyncio.run(stays_open_notes(store, "a")), "libtmux" in sys.modules)
"""


def test_no_tmux_server_means_no_window_and_no_tmux_run(tmp_path: Path) -> None:
    desired = tmp_path / "desired.yaml"
    desired.write_text("project: my-project-123\nsettings: {tmux_socket: nobody-here}\n")
    env = {"TMUX_TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(desired), str(tmp_path / "state")],
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False", "[]", "False"]
