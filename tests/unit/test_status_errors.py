"""Errors keep their cause: a failing setup step, tmux window or workload action reaches the
snapshot's ``last_error`` (one line, once), the status table's NOTE (cut, and then whole
below the table) and the plan's reasons, with no control character left in a one-line field;
gcloud's boilerplate never stands in for the cause."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from reconciler.adapters import gcloud_stderr
from reconciler.core.memory import Memory, observe, record_failure
from reconciler.core.plan import plan
from reconciler.core.render import format_plan, format_status, snapshot_line
from reconciler.core.status import build_status
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation
from reconciler.model.status import StatusSnapshot, to_json
from tests.support.worlds import Z1, active, desired, setup, slot, world

NOW = 1_796_032_800.0
OSLOGIN_STDERR = """\
ERROR: gcloud crashed (ConnectionError): HTTPSConnectionPool(host='oslogin.googleapis.com', \
port=443): Max retries exceeded with url: /v1/users/None/loginProfile?alt=json (Caused by \
NameResolutionError("<urllib3.connection.HTTPSConnection object at 0x7f01ab845af0>: Failed to \
resolve 'oslogin.googleapis.com' ([Errno -2] Name or service not known)"))

If you would like to report this issue, please run the following command:
  gcloud feedback

To check gcloud for common problems, please run the following command:
  gcloud info --run-diagnostics
"""
# What adapters/oslogin raises for that run.
OSLOGIN_ERROR = "gcloud os-login describe-profile exited 1: " + gcloud_stderr.message(
    OSLOGIN_STDERR
)


def _scene() -> tuple[Desired, Observation, Memory]:
    want = desired(
        slot("held-v4", flags=setup(bootstrap=True, tmux=True)),
        slot("fine-v4", flags=setup(tmux=True)),
    )
    seen = world(active("held-v4", uid="42"), active("fine-v4", uid="43"))
    return want, seen, observe(Memory(), want, seen, now=NOW - 600)


def _failed(memory: Memory, key: str, message: str, detail: str = "") -> Memory:
    return record_failure(
        memory, f"{Z1}/{key}", message=message, now=NOW - 5, permanent=False,
        fingerprint="f", detail=detail,
    )  # fmt: skip


def _snapshot(memory: Memory | None = None) -> StatusSnapshot:
    want, seen, base = _scene()
    memory = memory or base
    return build_status(
        desired=want,
        desired_file="d.yaml",
        errors=[],
        observation=seen,
        observed_at=NOW - 2,
        memory=memory,
        plan=plan(want, seen, memory, NOW),
        now=NOW,
        backend="rest",
    )


def _row(snapshot: StatusSnapshot, name: str) -> dict[str, Any]:
    (row,) = [r for r in to_json(snapshot)["slots"] if r["name"] == name]
    return row


def _no_control_characters(value: Any, where: str = "$") -> None:
    """Every string of the document but ``setup.detail`` (a worker's log, lines kept) is
    printable on one line."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "detail":
                _no_control_characters(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_control_characters(v, f"{where}[{i}]")
    elif isinstance(value, str):
        assert value.isprintable(), f"{where}: {value!r}"


def test_a_failing_tmux_step_is_the_slots_last_error_with_its_cause_once() -> None:
    _, _, memory = _scene()
    snapshot = _snapshot(_failed(memory, "held-v4:tmux", OSLOGIN_ERROR, detail=OSLOGIN_ERROR))
    row = _row(snapshot, "held-v4")
    assert row["last_error"] == f"tmux failed: {OSLOGIN_ERROR}"
    assert row["last_error"].count("NameResolutionError") == 1
    assert row["setup"]["detail"].count("NameResolutionError") == 1  # the log is the message
    document = json.dumps(to_json(snapshot))
    assert "gcloud feedback" not in document and "run-diagnostics" not in document
    assert _row(snapshot, "fine-v4")["last_error"] is None
    _no_control_characters(to_json(snapshot))


def test_a_workers_log_stays_below_the_message_and_out_of_last_error() -> None:
    _, _, memory = _scene()
    log = "[1/1] 10-pip.sh\npip: No matching distribution found for jaxx\nexit status 1"
    failing = _failed(memory, "held-v4:bootstrap", "bootstrap failed on worker 0", detail=log)
    row = _row(_snapshot(failing), "held-v4")
    assert row["setup"]["bootstrap"] == "failed"
    assert row["setup"]["detail"] == f"bootstrap failed on worker 0\n{log}"
    assert row["last_error"] == "bootstrap failed: bootstrap failed on worker 0"


def test_a_multi_line_message_is_folded_everywhere_it_is_one_line() -> None:
    _, _, memory = _scene()
    memory = _failed(memory, "held-v4:bootstrap", "ssh to 203.0.113.2:\n  refused\n")
    memory = _failed(memory, "fine-v4:launch", "launch:\tno route\r\nto host")
    snapshot = _snapshot(memory)
    held = _row(snapshot, "held-v4")["last_error"]
    assert held == "bootstrap failed: ssh to 203.0.113.2: refused"
    assert _row(snapshot, "fine-v4")["last_error"] == "launch failed: launch: no route to host"
    deferred = [d["why"] for d in to_json(snapshot)["plan"]["deferred"]]
    assert any("ssh to 203.0.113.2: refused" in why for why in deferred), deferred
    _no_control_characters(to_json(snapshot))


def test_without_a_node_a_setup_steps_old_failure_is_not_the_slots_error() -> None:
    want, _, memory = _scene()
    memory = _failed(memory, "held-v4:tmux", OSLOGIN_ERROR)
    gone = world(active("fine-v4", uid="43"))  # held-v4 was preempted: no node to set up
    snapshot = build_status(
        desired=want, desired_file="d.yaml", errors=[], observation=gone, observed_at=NOW,
        memory=memory, plan=plan(want, gone, memory, NOW), now=NOW, backend="rest",
    )  # fmt: skip
    assert _row(snapshot, "held-v4")["last_error"] is None


def test_the_clouds_error_comes_before_a_setup_steps() -> None:
    _, _, memory = _scene()
    memory = _failed(memory, "held-v4:tmux", OSLOGIN_ERROR)
    memory = _failed(memory, "held-v4:cloud", "PERMISSION_DENIED: no quota")
    assert _row(_snapshot(memory), "held-v4")["last_error"] == "PERMISSION_DENIED: no quota"


def test_the_table_cuts_a_long_error_in_note_and_shows_it_whole_below() -> None:
    _, _, memory = _scene()
    text = format_status(_snapshot(_failed(memory, "held-v4:tmux", OSLOGIN_ERROR)), NOW)
    (row,) = [line for line in text.splitlines() if line.startswith("held-v4")]
    assert "tmux failed: gcloud os-login describe-profile" in row and row.endswith("…")
    assert f"last error of held-v4: tmux failed: {OSLOGIN_ERROR}" in text.splitlines()
    assert "gcloud feedback" not in text


def test_a_short_error_is_shown_whole_in_note_only() -> None:
    _, _, memory = _scene()
    text = format_status(_snapshot(_failed(memory, "fine-v4:tmux", "tmux is not installed")), NOW)
    (row,) = [line for line in text.splitlines() if line.startswith("fine-v4")]
    assert row.endswith("tmux failed: tmux is not installed")
    assert "last error of" not in text


def test_the_same_error_on_many_slots_is_shown_once() -> None:
    _, _, memory = _scene()
    memory = _failed(memory, "held-v4:tmux", OSLOGIN_ERROR)
    memory = _failed(memory, "fine-v4:tmux", OSLOGIN_ERROR)
    text = format_status(_snapshot(memory), NOW)
    assert text.count("last error of held-v4, fine-v4: tmux failed:") == 1


def test_without_a_controller_the_snapshot_line_gives_no_age() -> None:
    want, _, _ = _scene()
    alone = build_status(
        desired=want, desired_file="d.yaml", errors=[], observation=None, observed_at=None,
        memory=Memory(), plan=None, now=NOW, backend="rest",
    )  # fmt: skip
    line = snapshot_line(replace(alone, note="no snapshot yet"), NOW)
    assert "0s old" not in line and "never" not in line and line.startswith("snapshot: none")
    assert snapshot_line(_snapshot(), NOW) == "snapshot: 0s old, observed 2s ago via rest"


def test_plan_text_shows_a_multi_line_error_on_its_own_line() -> None:
    want, seen, memory = _scene()
    memory = _failed(memory, "held-v4:bootstrap", "ssh to 203.0.113.2:\n  refused\n")
    text = format_plan(plan(want, seen, memory, NOW), now=NOW)
    (line,) = [x for x in text.splitlines() if "bootstrap held-v4" in x]
    assert "retrying after error: ssh to 203.0.113.2: refused" in line


def test_an_event_with_a_multi_line_error_reads_on_one_line_with_its_columns() -> None:
    from reconciler.surfaces.cli._ops_events import format_event

    record = {"ts": "2026-11-30T10:00:00Z", "kind": "action.failed", "slot": "held-v4",
              "action": "tmux", "retry": "transient", "delay": 30,
              "error": "gcloud exited 1: ERROR:\tno route\n\n  to host\n\x1b[31m"}  # fmt: skip
    line = format_event(record, slot_width=10)
    assert line == (
        "2026-11-30T10:00:00Z  action.failed      held-v4     tmux failed (retry in 30s): "
        "gcloud exited 1: ERROR: no route; to host; \\x1b[31m"
    )
