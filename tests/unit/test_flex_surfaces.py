"""Flex-start on every surface that makes or shows a slot: the ``add_slot`` edit (and so the
CLI and MCP tool built from it), ``init``, the emulator's scenario, ``plan``'s word on an
expired run, a race won by a run that has ended, the NOTE column and ``info``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import Memory
from reconciler.core.plan import plan
from reconciler.core.render import format_plan, status_rows
from reconciler.core.status import build_status, plan_dict
from reconciler.emulator._intake import from_scenario
from reconciler.emulator._scenario import Scenario, ScenarioError, ScenarioQueuedResource
from reconciler.errors import EditRejected, InitError
from reconciler.intent.edits import AddSlot
from reconciler.intent.engine import IntentEditor
from reconciler.intent.views import format_slot_info
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.load import parse_desired
from reconciler.model.stamps import epoch
from reconciler.runtime import init
from tests.support.worlds import Z1, Z2, desired, group, qr, slot, world

END = "2026-12-01T12:00:00Z"
T_END = epoch(END)
FLEX = replace(slot("f", mode="flex-start", accelerator="v6e-8"), max_run_seconds=6 * 3600)
RENEW = replace(FLEX, renew=True)

START = """\
project: my-project-123
defaults:
  mode: {mode}
slots: []
"""


def _ended(name: str = "f", state: QRState = QRState.SUSPENDED, zone: str = Z1) -> object:
    return replace(
        qr(name, zone, state=state, accelerator="v6e-8", initiator="SERVICE"),
        mode="flex-start",
        termination_time=END,
    )


def _store(tmp_path: Path, mode: str = "spot") -> IntentEditor:
    file = tmp_path / "desired.yaml"
    file.write_text(START.format(mode=mode), encoding="utf-8")
    return IntentEditor(file, StateDir(tmp_path / "state"))


# --- the add_slot edit ---------------------------------------------------------------------------


def test_add_slot_writes_a_flex_start_slot_that_validates(tmp_path: Path) -> None:
    store = _store(tmp_path)
    edit = AddSlot(Z1, "v6e-8", mode="flex-start", max_run_duration="6h", renew=True)
    result = store.apply(edit, source="test")
    text = store.path.read_text(encoding="utf-8")
    assert "max_run_duration: 6h" in text and "renew: true" in text
    (spec,) = parse_desired(text).slots
    assert spec.name == "flex-v6e8-usc2b-1"
    assert (spec.mode, spec.max_run_seconds, spec.renew) == ("flex-start", 21600, True)
    assert result.to_dict()["kind"] == "add_slot"


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (AddSlot(Z1, "v6e-8", mode="flex-start"), "mode flex-start needs 'max_run_duration'"),
        (AddSlot(Z1, "v6e-8", mode="flex-start", max_run_duration="8d"), "at most 7d"),
        (AddSlot(Z1, "v6e-8", mode="flex-start", max_run_duration="30s"), "at least 60s"),
        (AddSlot(Z1, "v6e-8", mode="flex-start", max_run_duration="6x"), "max_run_duration: "),
        (AddSlot(Z1, "v6e-8", mode="spot", renew=True), "renew needs mode flex-start"),
        (AddSlot(Z1, "v6e-8", max_run_duration="6h"), "needs mode flex-start, not spot"),
    ],
)
def test_add_slot_refuses_broken_flex_keys_in_one_line(
    tmp_path: Path, edit: AddSlot, says: str
) -> None:
    store = _store(tmp_path)
    before = store.path.read_text(encoding="utf-8")
    with pytest.raises(EditRejected) as caught:
        store.apply(edit, source="test")
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert store.path.read_text(encoding="utf-8") == before  # nothing written


def test_add_slot_under_a_flex_start_default_needs_the_run_length(tmp_path: Path) -> None:
    store = _store(tmp_path, mode="flex-start")
    with pytest.raises(EditRejected, match=r"needs 'max_run_duration'.*e\.g\. max_run_duration"):
        store.apply(AddSlot(Z1, "v6e-8"), source="test")
    store.apply(AddSlot(Z1, "v6e-8", max_run_duration="2h"), source="test")
    assert parse_desired(store.path.read_text(encoding="utf-8")).slots[0].max_run_seconds == 7200


# --- init ----------------------------------------------------------------------------------------


def test_init_writes_flex_start_slots_with_their_run_length() -> None:
    starter = init.Starter("my-project", (Z1, "us-east5-b"), ("v6e-8",), "flex-start", None, "6h")
    text = init.starter_text(starter)
    parsed = parse_desired(text)
    assert {(s.mode, s.max_run_seconds) for s in parsed.slots} == {("flex-start", 21600)}
    assert "# renew: true" in text


@pytest.mark.parametrize(
    ("mode", "run", "says"),
    [
        ("flex-start", None, "give --max-run-duration"),
        ("flex-start", "8d", "at most 7d"),
        ("flex-start", "soon", "--max-run-duration: expected a duration"),
        ("spot", "6h", "needs mode flex-start"),
    ],
)
def test_init_refuses_broken_flex_answers(mode: str, run: str | None, says: str) -> None:
    with pytest.raises(InitError, match=says):
        init.starter_text(init.Starter("my-project", (Z1,), ("v6e-8",), mode, None, run))


# --- the emulator's scenario ---------------------------------------------------------------------


def test_a_scenario_places_a_flex_start_run() -> None:
    scenario = Scenario.from_yaml(
        "queued_resources:\n"
        "  - {name: f, zone: us-east5-b, mode: flex-start, max_run_duration: 2h, state: ACTIVE}\n"
    )
    (spec,) = scenario.queued_resources
    assert from_scenario(spec, seq=1, now=0.0).max_run == 7200
    spot = ScenarioQueuedResource.model_validate({"name": "s", "zone": "us-east5-b"})
    assert from_scenario(spot, seq=2, now=0.0).max_run is None


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{name: f, zone: us-east5-b, mode: flex-start}", "needs max_run_duration"),
        ("{name: f, zone: us-east5-b, mode: flex-start, max_run_duration: 8d}", "at most 7d"),
        ("{name: f, zone: us-east5-b, max_run_duration: 2h}", "needs mode flex-start"),
    ],
)
def test_a_scenario_refuses_broken_flex_entries(entry: str, says: str) -> None:
    with pytest.raises(ScenarioError, match=says):
        Scenario.from_yaml(f"queued_resources:\n  - {entry}\n")


# --- plan says why nothing is planned ----------------------------------------------------------


def test_plan_explains_an_expired_run() -> None:
    made = plan(desired(FLEX), world(_ended()), Memory(), T_END + 5)
    assert made.actions == ()
    (line,) = made.ended
    assert f"expired at {END}" in line and "Set renew: true" in line
    text = format_plan(made, now=T_END + 5)
    assert f"  expired  f: flex-start run expired at {END}" in text
    assert text.rstrip().endswith("No changes.")
    assert plan_dict(made)["ended"] == [line]


def test_plan_says_a_renewing_run_waits_for_the_suspension() -> None:
    made = plan(desired(RENEW), world(_ended(state=QRState.SUSPENDING)), Memory(), T_END + 5)
    assert made.actions == ()
    assert "once the queued resource is SUSPENDED (now SUSPENDING)" in made.ended[0]


def test_nothing_ended_keeps_the_plan_document_as_it_was() -> None:
    made = plan(desired(FLEX), world(), Memory(), 0.0)
    assert made.ended == () and "ended" not in plan_dict(made)
    assert "  expired  " not in format_plan(made, now=0.0)


# --- a race won by a run that has ended ----------------------------------------------------------


def flex_race(*, renew: bool) -> tuple[Desired, SlotSpec, SlotSpec]:
    """Two flex-start candidates in two zones, one winner wanted."""
    a = replace(FLEX, name="fa", renew=renew)
    b = replace(FLEX, name="fb", zone=Z2, renew=renew)
    return desired(a, b, groups=[group("g", "fa", "fb")]), a, b


def test_a_race_won_by_an_expired_run_does_not_queue_the_others() -> None:
    want, a, b = flex_race(renew=False)
    made = plan(want, world(_ended(a.name, zone=a.zone)), Memory(), T_END + 5)
    assert made.actions == ()
    assert made.decided_want == {a.name: "held", b.name: "released"}
    assert made.ended and a.name in made.ended[0]


def test_a_renewing_race_queues_again_once_its_run_has_ended() -> None:
    want, a, b = flex_race(renew=True)
    made = plan(want, world(_ended(a.name, zone=a.zone)), Memory(), T_END + 5)
    assert sorted((x.kind.value, x.slot) for x in made.actions) == [
        ("create", b.name),
        ("replace", a.name),
    ]


# --- status NOTE and info ------------------------------------------------------------------------


def test_the_note_keeps_the_end_in_sight_beside_an_error() -> None:
    seen = world(replace(_ended(state=QRState.ACTIVE), ended_by=None))
    now = T_END - (5 * 3600 + 12 * 60)
    memory = Memory()
    snap = build_status(
        desired=desired(FLEX), desired_file="d", errors=(), observation=seen, observed_at=now,
        memory=memory, plan=None, now=now, backend="rest",
    )  # fmt: skip
    row = replace(snap.slots[0], last_error="tmux failed: the window could not open")
    note = status_rows(replace(snap, slots=(row,)), now)[0][-1]
    assert note.startswith("ends in 5h12m, tmux failed")


def _info(observed: dict[str, object], renew: bool) -> dict[str, object]:
    return {
        "name": "f",
        "mode": "flex-start",
        "observed": observed,
        "flex": {"max_run_duration": "6h", "renew": renew},
    }


def test_info_says_the_time_left_the_length_and_what_renew_does() -> None:
    now = T_END - (5 * 3600 + 12 * 60)
    text = format_slot_info(_info({"state": "ACTIVE", "ends_at": END}, False), now)
    assert f"flex-start run: ends at {END} (in 5h12m); max_run_duration 6h, renew: false" in text
    assert "set renew: true for a new run" in text
    ended = format_slot_info(_info({"state": "SUSPENDED", "expired": True}, True), now)
    assert "flex-start run: ended (expired); max_run_duration 6h, renew: true" in ended
    at = _info({"state": "SUSPENDED", "expired": True, "ends_at": END}, False)
    assert f"flex-start run: ended (expired) at {END}; max_run_duration 6h" in format_slot_info(at)
    queued = format_slot_info(_info({"state": "WAITING_FOR_RESOURCES"}, False), now)
    assert "flex-start run: starts once ACTIVE; max_run_duration 6h" in queued
    assert "flex-start" not in format_slot_info({"name": "s", "observed": {"state": "ACTIVE"}})


# --- the controller looks when a run's notice or end is due --------------------------------------


def test_a_running_flex_start_run_wakes_the_controller_for_its_notice_and_end() -> None:
    from reconciler.core.flex import next_wake

    running = world(replace(_ended(state=QRState.ACTIVE), ended_by=None))
    assert next_wake(desired(FLEX), running, T_END - 3600) == T_END - 1800
    assert next_wake(desired(FLEX), running, T_END - 1800) == T_END
    assert next_wake(desired(FLEX), running, T_END + 1) is None
    assert next_wake(desired(FLEX), world(_ended()), T_END - 3600) is None  # over already
    spot = replace(FLEX, mode="spot", max_run_seconds=None)
    assert next_wake(desired(spot), running, T_END - 3600) is None
    assert next_wake(None, running, 0.0) is None


def test_the_create_says_how_long_the_run_lasts() -> None:
    (action,) = plan(desired(FLEX), world(), Memory(), 0.0).actions
    assert action.reason.endswith("; flex-start: runs 6h once ACTIVE, then expired")
    (renewing,) = plan(desired(RENEW), world(), Memory(), 0.0).actions
    assert renewing.reason.endswith("then queued again (renew)")
    (plain,) = plan(desired(slot("s")), world(), Memory(), 0.0).actions
    assert "flex-start" not in plain.reason


def test_the_tui_table_says_the_time_left() -> None:
    from reconciler.surfaces.tui._frame import SlotRow

    now = T_END - (5 * 3600 + 12 * 60)
    row = SlotRow("f", mode="flex-start", state="ACTIVE", ends_at=T_END)
    assert "ACTIVE 5h12m left" in row.cells(now)
    assert row.state_cell(T_END + 1) == "ACTIVE"  # over: the next snapshot says expired
    assert SlotRow("s", state="ACTIVE").state_cell(now) == "ACTIVE"


# --- recommend: the race group it offers for flex-start ------------------------------------------


def test_the_recommended_flex_start_race_group_validates_as_pasted() -> None:
    from reconciler.core.capacity import Recommendation, race_group_yaml

    pick = Recommendation(Z1, 60.0, 4, 0, None, None)
    text = race_group_yaml("g", "v6e-8", "flex-start", [pick], slot_names=["flex-a"])
    parsed = parse_desired("project: my-project-123\n" + text)
    assert parsed.slots[0].max_run_seconds == 86400
    spot = race_group_yaml("g", "v6e-8", "spot", [pick], slot_names=["spot-a"])
    assert "max_run_duration" not in spot


def test_recommend_apply_gives_each_flex_start_candidate_its_run(tmp_path: Path) -> None:
    from reconciler.intent.edits_race import RaceZones

    store = _store(tmp_path)
    edit = RaceZones("g", "v6e-8", (Z1, Z2), "flex-start", 1, max_run_duration="12h")
    store.apply(edit, source="test")
    parsed = parse_desired(store.path.read_text(encoding="utf-8"))
    assert [(s.mode, s.max_run_seconds) for s in parsed.slots] == [("flex-start", 43200)] * 2
    with pytest.raises(EditRejected, match="needs 'max_run_duration'"):
        store.apply(RaceZones("h", "v6e-8", (Z1,), "flex-start"), source="test")


def test_init_on_a_terminal_asks_for_the_run_length_of_flex_start() -> None:
    import argparse

    from reconciler.surfaces.cli._ops_doctor_init import _questions

    args = argparse.Namespace(
        project="my-project", zone=[Z1], accelerator=["v6e-8"], mode=None, race=None,
        max_run_duration=None,
    )  # fmt: skip
    asked: list[str] = []
    answers = iter(["flex-start", "12h"])

    def read(question: str) -> str:
        asked.append(question)
        return next(answers)

    _questions(args, read)
    assert (args.mode, args.max_run_duration) == ("flex-start", "12h")
    assert asked[-1].startswith("How long each flex-start run lasts (at most 7d)")


def test_the_control_api_places_a_flex_start_run_that_ends(make_emulator: Any) -> None:
    import httpx

    emu = make_emulator(speed=0)
    with httpx.Client(base_url=emu.url, timeout=10) as http:
        body = {"zone": Z1, "name": "f", "mode": "flex-start", "max_run_duration": 600}
        placed = http.post("_emulator/queued-resources", json={**body, "state": "ACTIVE"})
        assert placed.status_code == 200, placed.text
        refused = http.post("_emulator/queued-resources", json={**body, "name": "g"} | {
            "max_run_duration": None})  # fmt: skip
        assert refused.status_code == 400 and "needs max_run_duration" in refused.text
    emu.advance(601)
    assert emu.node(Z1, "f") is None  # the run is over: its VMs are deleted


def test_the_time_left_keeps_the_state_colour() -> None:
    from reconciler.surfaces.tui._widgets import STATE_COLOURS, colour_key

    assert STATE_COLOURS.get(colour_key("ACTIVE 5h12m left")) == STATE_COLOURS["ACTIVE"]
    assert colour_key("WAITING_FOR_RESOURCES") == "WAITING_FOR_RESOURCES"
