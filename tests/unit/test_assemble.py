"""``runtime.assemble.build_controller``: the one construction that ``run``, ``apply``, ``plan``
and the demo share, so a controller that keeps running always records capacity history."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.statedir import StateDir
from reconciler.runtime.assemble import build_controller
from reconciler.runtime.history import HistoryRecorder


def test_a_running_controller_records_history_into_its_own_state(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    desired = tmp_path / "desired.yaml"
    controller = build_controller(desired, state, allow_destructive=True, history=True)
    assert isinstance(controller.history, HistoryRecorder)
    assert controller.history.path == state.history
    assert controller.history.events is controller.events  # its failures reach the event log
    assert controller.store.path == desired and controller.allow_destructive


def test_a_one_shot_pass_records_nothing(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    controller = build_controller(
        tmp_path / "desired.yaml", state, allow_destructive=False, history=False
    )
    assert controller.history is None and not controller.allow_destructive


def test_overrides_come_from_the_environment_given(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    env = {"TPU_RECONCILER_POLL_INTERVAL": "7s"}
    controller = build_controller(
        tmp_path / "desired.yaml", state, allow_destructive=False, history=False, env=env
    )
    assert controller.store.env == env
