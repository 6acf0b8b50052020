"""Read-only views over desired.yaml and the controller's snapshot, and waiting for it."""

from __future__ import annotations

import json
import shlex
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.files import write_json
from reconciler.adapters.statedir import StateDir
from reconciler.intent import views
from reconciler.intent.edits import Edit, Hold, Release, Setup
from reconciler.intent.edits_race import Race
from reconciler.intent.engine import IntentEditor
from reconciler.model import names
from tests.unit.test_intent import SAMPLE


def iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def row(name: str, state: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "zone": "us-central2-b", "accelerator": "v4-8", "mode": "spot",
            "want": "held", "managed": True, "race_group": None, "state": state,
            "ips": [], "instance": None, "setup": None, "tmux": None, **extra}  # fmt: skip


def snapshot(*rows: dict[str, Any], at: datetime | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": "tpu-reconciler.status.v1",
        "generated_at": iso(at or datetime.now(UTC)),
        "desired": {"digest": None},
        "slots": list(rows),
        "race_groups": [],
        "plan": {"summary": "No changes.", "actions": []},
        "tmux": {"windows": ["tpu-usc2b:small", "tpu-usc2b:old"], "orphans": ["tpu-usc2b:old"]},
        **extra,
    }


@pytest.fixture
def store(tmp_path: Path) -> IntentEditor:
    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE.replace("settings:\n", "settings:\n  ssh_user: alice\n"))
    return IntentEditor(file, StateDir(tmp_path / "state").ensure(), env={})


def test_list_slots_without_a_snapshot_shows_desired_only_and_says_so(store: IntentEditor) -> None:
    doc = views.list_slots(store)
    assert doc["schema_version"] == "tpu-reconciler.mcp.v1"
    assert doc["snapshot"]["present"] is False and "desired intent only" in doc["snapshot"]["note"]
    by_name = {s["name"]: s for s in doc["slots"]}
    assert by_name["big"]["want"] == "held" and by_name["big"]["observed"] is None
    assert by_name["cand-a"]["race_group"] == "any-v6e8"
    assert by_name["spot-v6e8-use5b-1"]["generated"] is True


def test_list_slots_joins_the_snapshot_and_lists_unmanaged(store: IntentEditor) -> None:
    made = datetime.now(UTC) - timedelta(seconds=30)
    write_json(store.state.status, snapshot(row("small", "ACTIVE", latency_ms=141.3),
               row("stray", "ACTIVE", managed=False, want=None), at=made))  # fmt: skip
    doc = views.list_slots(store)
    by_name = {s["name"]: s for s in doc["slots"]}
    assert by_name["small"]["observed"]["state"] == "ACTIVE"
    assert by_name["small"]["observed"]["latency_ms"] == 141.3  # the zone's round trip
    assert by_name["stray"]["want"] is None and "unmanaged" in by_name["stray"]["note"]
    assert 29 <= doc["snapshot"]["age_seconds"] < 60
    assert doc["snapshot"]["controller"] == {"running": False, "pid": None}


def test_ssh_command_pins_the_instance_host_key(store: IntentEditor) -> None:
    write_json(store.state.status, snapshot(row("small", "ACTIVE", ips=["10.0.0.5", "10.0.0.6"],
               instance="small@12345")))  # fmt: skip
    doc = views.ssh_command(store, "small", worker=1)
    argv = shlex.split(doc["command"])
    assert argv == doc["argv"] and argv[-1] == "alice@10.0.0.6"
    assert f"HostKeyAlias={names.host_key_alias('small@12345', 1)}" in argv
    assert f"UserKnownHostsFile={store.state.known_hosts}" in argv
    with pytest.raises(views.ViewError, match=r"workers 0\.\.1"):
        views.ssh_command(store, "small", worker=2)


def test_ssh_command_explains_what_is_missing(store: IntentEditor) -> None:
    with pytest.raises(views.ViewError, match="no status snapshot"):
        views.ssh_command(store, "small")
    write_json(store.state.status, snapshot(row("small", "WAITING_FOR_RESOURCES")))
    with pytest.raises(views.ViewError, match="no node yet"):
        views.ssh_command(store, "small")
    info = views.slot_info(store, "small")
    assert info["ssh"]["available"] is False and "no node yet" in info["ssh"]["why"]
    with pytest.raises(views.ViewError, match="unknown slot"):
        views.slot_info(store, "nowhere")


def test_tmux_status_flags_orphans_and_plan_comes_from_the_snapshot(store: IntentEditor) -> None:
    write_json(store.state.status, snapshot())
    tmux = views.tmux_status(store)
    assert {w["target"]: w["orphaned"] for w in tmux["windows"]} == {
        "tpu-usc2b:small": False,
        "tpu-usc2b:old": True,
    }
    assert views.plan(store)["plan"]["summary"] == "No changes."


def test_events_tail_skips_a_torn_last_line(store: IntentEditor) -> None:
    lines = [json.dumps({"n": i}) for i in range(80)]
    store.state.events.write_text("\n".join(lines) + '\n{"n": 80, "tor')
    doc = views.events(store, limit=5)
    assert [e["n"] for e in doc["events"]] == [75, 76, 77, 78, 79]
    assert views.events(store)["count"] == 50


def edit(store: IntentEditor, change: Edit) -> Any:
    return store.apply(change, source="mcp", confirmed=True)


def test_wait_returns_when_a_later_snapshot_shows_the_intended_state(store: IntentEditor) -> None:
    old = datetime.now(UTC) - timedelta(minutes=5)
    write_json(store.state.status, snapshot(row("small", "ACTIVE"), at=old))  # stale: ignored
    result = edit(store, Hold(name="small"))

    def controller() -> None:
        time.sleep(0.3)
        write_json(store.state.status, snapshot(row("small", "WAITING_FOR_RESOURCES")))
        time.sleep(0.3)
        write_json(store.state.status, snapshot(row("small", "ACTIVE")))

    threading.Thread(target=controller).start()
    waited = views.wait_for(store, result, 5, interval=0.05)
    assert waited["reached"] is True and waited["observed"][0]["state"] == "ACTIVE"
    assert 0.5 <= waited["waited_seconds"] < 4


def test_wait_times_out_with_the_current_state(store: IntentEditor) -> None:
    result = edit(store, Release(name="big"))
    write_json(store.state.status, snapshot(row("big", "ACTIVE", want="released")))
    waited = views.wait_for(store, result, 0.4, interval=0.05)
    assert waited["reached"] is False and waited["observed"][0]["state"] == "ACTIVE"
    write_json(store.state.status, snapshot(row("big", "NOT_QUEUED", want="released")))
    assert views.wait_for(store, result, 1, interval=0.05)["reached"] is True


def test_wait_for_setup_and_races(store: IntentEditor) -> None:
    result = edit(store, Setup(name="small", bootstrap=True, rerun=True))
    done = {"bootstrap": "done", "tailscale": "off", "generation": 1, "detail": None}
    write_json(store.state.status, snapshot(row("small", "ACTIVE", setup={**done,
               "generation": 0})))  # fmt: skip
    assert views.wait_for(store, result, 0.2, interval=0.05)["reached"] is False
    write_json(store.state.status, snapshot(row("small", "ACTIVE", setup=done)))
    assert views.wait_for(store, result, 1, interval=0.05)["reached"] is True
    race = edit(store, Race(group="any-v6e8", slots=("cand-a", "cand-b"), count=1))
    groups = [{"name": "any-v6e8", "count": 1, "winners": ["cand-b"], "candidates": []}]
    write_json(store.state.status, snapshot(race_groups=groups))
    assert views.wait_for(store, race, 1, interval=0.05)["reached"] is True


def test_an_unknown_slot_is_named_with_the_nearest_one_or_with_what_is_wrong_with_the_file(
    store: IntentEditor,
) -> None:
    with pytest.raises(views.ViewError, match=r"unknown slot 'smal'.*did you mean 'small'\?"):
        views.slot_info(store, "smal")
    store.path.write_text("project: p\nslots:\n  - name: a\n\tzone: x\n")
    with pytest.raises(views.ViewError) as raised:
        views.slot_info(store, "a")
    assert "is invalid: " in str(raised.value) and "desired.yaml:4:" in str(raised.value)


def test_a_setup_steps_failure_reaches_slot_info_as_its_last_error(store: IntentEditor) -> None:
    failing = "tmux failed: gcloud os-login describe-profile exited 1: ERROR: NameResolutionError"
    write_json(store.state.status, snapshot(row("small", "ACTIVE", last_error=failing)))
    assert views.slot_info(store, "small")["observed"]["last_error"] == failing


def test_info_says_a_setup_failure_once_and_keeps_the_workers_log(store: IntentEditor) -> None:
    message = "bootstrap on worker 2 (10.1.2.5): exit 1"
    failing = {"bootstrap": "failed", "tailscale": "off", "generation": 0,
               "detail": f"{message}\n[w2] pip: no such package\nexit 1"}  # fmt: skip
    write_json(store.state.status, snapshot(row("small", "ACTIVE", setup=failing,
               last_error=f"bootstrap failed: {message}")))  # fmt: skip
    observed = views.slot_info(store, "small")["observed"]
    assert observed["last_error"] == f"bootstrap failed: {message}"
    assert observed["setup"]["detail"] == "[w2] pip: no such package\nexit 1"
    cloud = {**failing, "detail": message}  # another error is the slot's last: keep the message
    write_json(store.state.status, snapshot(row("small", "ACTIVE", setup=cloud,
               last_error="PERMISSION_DENIED: no quota")))  # fmt: skip
    assert views.slot_info(store, "small")["observed"]["setup"]["detail"] == message


def test_slot_info_in_words_is_what_info_and_the_tui_show(store: IntentEditor) -> None:
    log = "[w0] setup.sh: not found"
    setup = {"bootstrap": "failed", "tailscale": "off", "generation": 2, "detail": f"exit 1\n{log}"}
    write_json(store.state.status, snapshot(row("small", "ACTIVE", setup=setup, ips=["10.0.0.7"],
               instance="small@17", last_error="bootstrap failed: exit 1")))  # fmt: skip
    lines = views.format_slot_info(views.slot_info(store, "small")).splitlines()
    # the file's word, and the API that holds it
    assert lines[0] == "small  us-central2-b  v4-8  spot  api tpu  want released"
    assert lines[1] == "state ACTIVE"
    assert lines[2] == "workers: w0 10.0.0.7"
    assert lines[3].startswith("ssh: ssh ") and "10.0.0.7" in lines[3]
    assert lines[4:] == [
        "last error: bootstrap failed: exit 1",
        "created -   instance small@17",
        "setup: bootstrap failed, tailscale off, generation 2",
        f"  {log}",  # the message is said once, as the last error
    ]


def test_slot_info_says_an_emulated_nodes_ssh_command_cannot_connect(store: IntentEditor) -> None:
    write_json(store.state.status, snapshot(row("small", "ACTIVE", ips=["203.0.113.7"],
               instance="small@17")))  # fmt: skip
    lines = views.format_slot_info(views.slot_info(store, "small")).splitlines()
    assert lines[3].startswith("ssh: ssh ") and "203.0.113.7" in lines[3]
    assert "emulated node: no machine stands behind 203.0.113.7" in lines[4]
