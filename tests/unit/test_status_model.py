"""model/status: the snapshot's typed values and their JSON, and adapters/status_file.

The JSON is the interface other tools read (docs/status-snapshot.md): a snapshot read and written
back must be byte-identical to what the controller wrote, whatever it holds."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.status_file import read_status, write_status
from reconciler.errors import StatusUnreadable
from reconciler.model.status import (
    STATUS_SCHEMA,
    SetupStatus,
    SlotStatus,
    StatusSnapshot,
    added,
    decode_as,
    encode,
    from_json,
    to_json,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "status.json"


def golden_text() -> str:
    return GOLDEN.read_text(encoding="utf-8")


def test_the_golden_snapshot_round_trips_byte_for_byte() -> None:
    text = golden_text()
    snapshot = from_json(json.loads(text))
    assert json.dumps(to_json(snapshot), indent=2) + "\n" == text  # `status --json`
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    assert json.dumps(to_json(snapshot), separators=(",", ":")) == compact  # the writer's form
    assert from_json(to_json(snapshot)) == snapshot


def test_values_are_typed_and_frozen() -> None:
    snapshot = from_json(json.loads(golden_text()))
    first = snapshot.slots[0]
    assert isinstance(first, SlotStatus) and first.ips == ("34.1.2.3",)
    assert first.setup == SetupStatus(bootstrap="done", tailscale="off", generation=0)
    assert snapshot.plan is not None and snapshot.plan.actions[0].kind == "replace"
    assert snapshot.race_groups[0].candidates == ("spot-v6e8-ew4a-1", "spot-v6e8-use1d-1")
    assert snapshot.in_flight == () and snapshot.note is None
    assert snapshot.active() == {"od-v48-usc2b-1", "od-v432-usc2b-1"}
    with pytest.raises(FrozenInstanceError):
        first.state = "FAILED"  # type: ignore[misc]
    assert hash(first.setup) == hash(SetupStatus(bootstrap="done", tailscale="off"))


def test_a_snapshot_built_in_code_round_trips() -> None:
    built = StatusSnapshot(
        generated_at="2026-11-30T10:00:00Z",
        slots=(SlotStatus(name="a", ips=("10.0.0.1",), setup=SetupStatus(detail="x\ny")),),
        note="no snapshot yet",
    )
    assert from_json(json.loads(json.dumps(to_json(built)))) == built
    assert next(iter(to_json(built))) == "schema_version"


def test_missing_optional_keys_take_defaults_and_unknown_keys_survive() -> None:
    doc: dict[str, Any] = {
        "schema_version": STATUS_SCHEMA,
        "generated_at": "2026-11-30T10:00:00Z",
        "slots": [{"name": "a", "state": "ACTIVE", "newer": {"x": 1}}],
        "from_the_future": [1, 2],
    }
    snapshot = from_json(doc)
    assert snapshot.plan is None and snapshot.tmux.windows == () and snapshot.desired.valid is False
    assert snapshot.slots[0].setup is None and snapshot.slots[0].ips == ()
    assert snapshot.slots[0].extra == {"newer": {"x": 1}}
    out = to_json(snapshot)
    assert out["from_the_future"] == [1, 2] and out["slots"][0]["newer"] == {"x": 1}
    assert from_json(out) == snapshot


@pytest.mark.parametrize(
    "doc",
    [
        {"schema_version": "tpu-reconciler.status.v2"},
        {"generated_at": "2026-11-30T10:00:00Z"},
        [],
        {"schema_version": STATUS_SCHEMA, "slots": {"a": {}}},
        {"schema_version": STATUS_SCHEMA, "slots": [{"state": "ACTIVE"}]},
        {"schema_version": STATUS_SCHEMA, "slots": [{"name": "a", "setup": "done"}]},
    ],
)
def test_another_schema_or_an_unusable_shape_is_refused(doc: Any) -> None:
    with pytest.raises(ValueError):
        from_json(doc)


def test_an_added_field_is_written_only_when_set() -> None:
    @dataclass(frozen=True)
    class Row:
        name: str
        old: str | None = None
        new: str | None = added()
        extra: Any = field(default_factory=dict, repr=False, hash=False)

    assert encode(Row(name="a")) == {"name": "a", "old": None}
    assert encode(Row(name="a", new="x")) == {"name": "a", "old": None, "new": "x"}
    assert decode_as(Row, {"name": "a", "new": "x"}) == Row(name="a", new="x")


def test_the_file_reader_reports_a_broken_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    assert read_status(path) is None  # not written yet
    snapshot = from_json(json.loads(golden_text()))
    write_status(path, snapshot)
    assert read_status(path) == snapshot
    assert path.stat().st_mode & 0o777 == 0o600
    path.write_text('{"schema_version": "tpu-reconciler.status.v1", "slots": [', encoding="utf-8")
    with pytest.raises(StatusUnreadable, match="is unreadable"):
        read_status(path)
    path.write_text(json.dumps({"schema_version": "other"}), encoding="utf-8")
    with pytest.raises(StatusUnreadable, match="unknown schema"):
        read_status(path)


def test_keys_come_in_field_order_however_the_value_was_made() -> None:
    """Built by ``__init__``, by ``replace`` or by decoding, and for a subclass whose fields
    follow the base's ``extra``, the keys are in field order (the on-disk order)."""
    from reconciler.model.status import DeferredActionStatus

    order = ["symbol", "kind", "slot", "zone", "reason", "destructive", "why", "until"]
    built = DeferredActionStatus(until="2026-12-01T00:00:00Z", symbol="+", why="later")
    assert list(encode(built)) == order
    assert list(encode(replace(built, kind="create"))) == order
    assert (
        list(encode(decode_as(DeferredActionStatus, dict(reversed(encode(built).items())))))
        == order
    )
    row = replace(SlotStatus(name="a", zone="z"), paused=True)
    assert list(encode(row))[-2:] == ["instance", "paused"]  # an added field, once it is set


def test_status_from_a_snapshot_loads_none_of_the_heavy_libraries(tmp_path: Path) -> None:
    """``status`` with a snapshot to show imports neither the desired-file loader (pydantic,
    PyYAML) nor the edits' round trip (ruamel) nor what other commands use (MCP, Textual, SSH,
    HTTP, tmux)."""
    import shutil
    import subprocess
    import sys

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    shutil.copy(GOLDEN, state)
    code = (
        "import sys\n"
        "from reconciler.surfaces.cli import main\n"
        f"code = main(['-f', {str(tmp_path / 'desired.yaml')!r}, '--state-dir', {str(state)!r},"
        " 'status'])\n"
        "heavy = {'pydantic', 'yaml', 'ruamel.yaml', 'mcp', 'textual', 'asyncssh', 'httpx',"
        " 'libtmux'}\n"
        "print(code, sorted(heavy & set(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "0 []"
    assert "od-v48-usc2b-1" in done.stdout


def test_status_values_are_plain_dataclasses() -> None:
    """``dataclasses.replace``, ``fields`` and ``asdict`` work on every status value."""
    import dataclasses

    snapshot = from_json(json.loads(golden_text()))
    row = dataclasses.replace(snapshot.slots[0], state="FAILED")
    assert row.state == "FAILED" and row.name == snapshot.slots[0].name
    assert [f.name for f in dataclasses.fields(SetupStatus)][-1] == "extra"
    assert dataclasses.asdict(snapshot)["slots"][0]["name"] == snapshot.slots[0].name


def test_a_slots_round_trip_is_written_only_when_known_and_read_back() -> None:
    assert "latency_ms" not in encode(SlotStatus(name="a", zone="z"))  # v1 bytes as they were
    row = SlotStatus(name="a", zone="z", latency_ms=141.3)
    assert list(encode(row))[-1] == "latency_ms" and encode(row)["latency_ms"] == 141.3
    assert decode_as(SlotStatus, encode(row)).latency_ms == 141.3
