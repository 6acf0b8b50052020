"""One user's state directory keeps its flat layout, read in place (nothing moves, no
``controller/`` appears); a shared lab's is laid out by its controller's start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reconciler.adapters.files import SHARED_DIR, atomic_write
from reconciler.adapters.statedir import StateDir
from reconciler.runtime.lock import ControllerLock


def test_one_users_state_directory_stays_as_it_was(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    atomic_write(state.memory, "{}")
    with ControllerLock(state, desired=tmp_path / "desired.yaml") as lock:
        assert lock.layout is None
    assert not state.lab and not (state.root / "controller").exists()
    assert state.memory == state.root / "memory.json" and state.memory.exists()
    assert state.intent_lock == state.root / "intent.lock"
    assert stat.S_IMODE(state.root.stat().st_mode) == 0o700


def test_a_shared_directory_is_laid_out_by_its_controllers_start(tmp_path: Path) -> None:
    desired = tmp_path / "desired.yaml"
    desired.write_text("project: p\nslots: []\n")
    desired.chmod(0o664)
    state = StateDir(tmp_path / "state").ensure()
    atomic_write(state.root / "memory.json", "{}")
    state.root.chmod(SHARED_DIR)  # an older lab's
    with ControllerLock(state, desired=desired) as lock:
        assert lock.layout is not None and "memory.json" in lock.layout.moved
        assert "controller.lock" in lock.layout.moved  # moved with its flock held
        assert state.lock == state.root / "controller" / "controller.lock"
    assert state.lab and state.memory.exists()
    assert stat.S_IMODE(desired.stat().st_mode) == 0o644  # its owner's alone to write
    assert stat.S_IMODE((tmp_path / "desired.d").stat().st_mode) == 0o3770
    assert os.path.isdir(state.inbox)
