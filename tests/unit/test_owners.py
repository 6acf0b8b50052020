"""Owners and a shared lab's policy: the pure decision (who may edit what), the policy file read
fail-closed, the edits' owner stamps and refusals through the real intent engine, and the
status filter. The two-user journey with real Unix users is tests/integration/test_shared_lab.py.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
from pathlib import Path

import pytest

from reconciler.adapters.audit import intent_changes, read_audit
from reconciler.adapters.files import SHARED_DIR, append_jsonl, atomic_write
from reconciler.adapters.lab import POLICY_MODE, parse_policy, policy_path, read_policy
from reconciler.adapters.statedir import StateDir
from reconciler.core.owners import only_owner, owners
from reconciler.errors import NeedsConfirmation, NotYourSlot
from reconciler.exitcodes import EX_NOPERM
from reconciler.intent.edits import AddSlot, Hold, Release
from reconciler.intent.edits_race import Race
from reconciler.intent.engine import IntentEditor
from reconciler.intent.owners import Actor
from reconciler.model.load import parse_desired
from reconciler.model.policy import Policy, policy_from_document, refusal
from reconciler.model.status import RaceGroupStatus, SlotStatus, StatusSnapshot

# --- the decision ----------------------------------------------------------------------------

LAB = Policy(admins=frozenset({"carol"}))


@pytest.mark.parametrize(
    ("policy", "user", "owner", "allowed"),
    [
        (LAB, "bob", None, True),  # nobody's: anyone's to edit (and then theirs)
        (LAB, "alice", "alice", True),  # one's own
        (LAB, "bob", "alice", False),  # another member's
        (LAB, "carol", "alice", True),  # an admin
        (Policy(edit_others=True), "bob", "alice", True),  # a lab that lets everyone
        (Policy.private(), "root", "alice", True),  # one user's own state directory
        (Policy.broken("x"), "bob", "alice", False),  # fail closed
        (Policy.broken("x"), "alice", "alice", True),  # ... but one's own stays editable
        (Policy(admins=frozenset({"carol"}), problem="x"), "carol", "alice", False),
    ],
)
def test_who_may_edit_what(policy: Policy, user: str, owner: str | None, allowed: bool) -> None:
    assert (refusal(policy, user, owner, "slot 'a1'") is None) is allowed


def test_a_refusal_says_whose_it_is_and_who_could() -> None:
    said = refusal(LAB, "bob", "alice", "slot 'a1'")
    assert said == (
        "slot 'a1' belongs to alice, not to bob; only alice or a lab admin (carol) may change it"
    )
    broken = refusal(Policy.broken("it is missing"), "bob", "alice", "slot 'a1'")
    assert broken is not None and "belongs to alice" in broken and "it is missing" in broken


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ("just text", "not a mapping"),
        ({"admins": "carol"}, "admins must be a list"),
        ({"admins": ["Carol Smith"]}, "invalid user name"),
        ({"edit_others": "yes"}, "edit_others must be true or false"),
        ({"caps": [1]}, "caps must be a mapping"),
        ({"admin": ["carol"]}, "unknown key(s) in the policy file: admin"),
    ],
)
def test_a_malformed_policy_grants_nothing(doc: object, problem: str) -> None:
    policy = policy_from_document(doc)
    assert policy.problem is not None and problem in policy.problem
    assert policy.shared and not policy.admins and not policy.edit_others


def test_a_policy_document_and_an_empty_one() -> None:
    policy = policy_from_document({"admins": ["carol"], "edit_others": False, "caps": {}})
    assert policy == Policy(admins=frozenset({"carol"}))
    assert policy_from_document(None) == Policy()  # empty file: the strictest, not an error
    assert parse_policy(b"admins: [carol\n", "p.yaml").problem is not None


# --- the policy file, read fail-closed -------------------------------------------------------


def shared_state(tmp_path: Path, policy: str | None) -> StateDir:
    state = StateDir(tmp_path / "state")
    state.root.mkdir()
    os.chmod(state.root, SHARED_DIR)
    if policy is not None:
        atomic_write(policy_path(state), policy, mode=POLICY_MODE)
    return state


def test_a_private_state_directory_enforces_nothing(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    assert read_policy(state) == Policy.private()


def test_the_policy_file_is_read_and_distrusted_when_others_may_write_it(tmp_path: Path) -> None:
    state = shared_state(tmp_path, "admins: [carol]\nedit_others: false\ncaps: {}\n")
    assert read_policy(state) == Policy(admins=frozenset({"carol"}))
    os.chmod(policy_path(state), 0o660)
    problem = read_policy(state).problem
    assert problem is not None and "writable by others" in problem


def test_a_missing_or_malformed_policy_fails_closed(tmp_path: Path) -> None:
    state = shared_state(tmp_path, None)
    missing = read_policy(state)
    assert missing.problem is not None and "missing" in missing.problem
    atomic_write(policy_path(state), "admins: [carol\n", mode=POLICY_MODE)
    malformed = read_policy(state)
    assert malformed.problem is not None and "not valid YAML" in malformed.problem


def test_files_in_a_shared_directory_are_the_groups(tmp_path: Path) -> None:
    state = shared_state(tmp_path, None)
    atomic_write(state.status, "{}")
    append_jsonl(state.audit, {"a": 1})
    secrets = state.secrets  # private even though it inherits the setgid bit
    atomic_write(secrets / "k", "s")
    assert stat.S_IMODE(state.status.stat().st_mode) == 0o660
    assert stat.S_IMODE(state.audit.stat().st_mode) == 0o660
    assert stat.S_IMODE((secrets / "k").stat().st_mode) == 0o600
    state.ensure()  # does not tighten a shared directory back to 0700
    assert stat.S_IMODE(state.root.stat().st_mode) == SHARED_DIR


# --- edits: stamps and refusals through the engine -------------------------------------------

DESIRED = """\
project: proj-1
slots:
  # alice's v4
  - {name: a1, zone: us-central2-b, accelerator: v4-8, want: held, owner: alice}
  - {name: free1, zone: us-central2-b, accelerator: v4-8, want: held}
  - {name: c1, zone: europe-west4-a, accelerator: v6e-8}
  - {name: c2, zone: us-east1-d, accelerator: v6e-8}
race_groups:
  - {name: g, slots: [c1, c2], owner: alice}
"""


def editor(tmp_path: Path, user: str, policy: str | None = "admins: [carol]\n") -> IntentEditor:
    file = tmp_path / "desired.yaml"
    if not file.exists():
        file.write_text(DESIRED)
        if policy is not None:
            shared_state(tmp_path, policy)
    store = IntentEditor(file, StateDir(tmp_path / "state"), env={})
    store.actor = Actor(user, 4242)
    return store


def owner_of(store: IntentEditor, slot: str) -> str | None:
    spec = parse_desired(store.path.read_text()).slot(slot)
    assert spec is not None
    return spec.owner


def test_bobs_release_of_alices_slot_is_refused_before_he_is_asked(tmp_path: Path) -> None:
    bob = editor(tmp_path, "bob")
    before = bob.path.read_bytes()
    with pytest.raises(NotYourSlot) as refused:
        bob.apply(Release("a1"), source="cli")  # not confirmed: whose it is comes first
    assert refused.value.owner == "alice" and refused.value.exit_code == EX_NOPERM
    assert "slot 'a1' belongs to alice, not to bob" in str(refused.value)
    with pytest.raises(NotYourSlot):
        bob.apply(Release("a1"), source="cli", confirmed=True)
    with pytest.raises(NotYourSlot, match="race group 'g' belongs to alice"):
        bob.apply(Race("g", ("c1",), 1), source="mcp", confirmed=True)
    with pytest.raises(NotYourSlot, match="slot 'c1' belongs to alice"):  # via its group
        bob.apply(Hold("c1"), source="tui")
    assert bob.path.read_bytes() == before
    assert list(read_audit(bob.state)) == []  # a refusal writes nothing


def test_an_admins_edit_is_allowed_and_keeps_the_owner(tmp_path: Path) -> None:
    editor(tmp_path, "bob")
    carol = editor(tmp_path, "carol")
    with pytest.raises(NeedsConfirmation):
        carol.apply(Release("a1"), source="cli")
    result = carol.apply(Release("a1"), source="cli", confirmed=True)
    assert result.status == "changed" and result.user == "carol"
    assert owner_of(carol, "a1") == "alice"
    carol.apply(Hold("c1"), source="cli")  # leaves alice's group: still alice's
    assert owner_of(carol, "c1") == "alice"
    assert "# alice's v4" in carol.path.read_text()
    audit = list(read_audit(carol.state))
    assert [(r["kind"], r["user"], r["uid"], r["source"]) for r in audit] == [
        ("release", "carol", 4242, "cli"),
        ("hold", "carol", 4242, "cli"),
    ]


def test_an_edit_stamps_its_user_on_what_it_makes_or_claims(tmp_path: Path) -> None:
    bob = editor(tmp_path, "bob")
    result = bob.apply(AddSlot("us-central2-b", "v4-8", name="b1"), source="cli")
    assert "'b1': owner: bob" in result.notes
    assert owner_of(bob, "b1") == "bob"
    bob.apply(Hold("free1"), source="cli")  # nobody's: now bob's
    assert owner_of(bob, "free1") == "bob"
    bob.apply(Release("b1"), source="cli", confirmed=True)  # his own: no admin needed
    alice = editor(tmp_path, "alice")
    with pytest.raises(NotYourSlot, match="belongs to bob"):
        alice.apply(Hold("b1"), source="cli")


def test_a_file_without_owners_in_a_private_directory_stays_without(tmp_path: Path) -> None:
    file = tmp_path / "desired.yaml"
    file.write_text(
        "project: proj-1\nslots:\n  - {name: x, zone: us-central2-b, "
        "accelerator: v4-8, want: held}\n"
    )
    store = IntentEditor(file, StateDir(tmp_path / "state"), env={})
    store.apply(AddSlot("us-central2-b", "v4-8", name="y"), source="cli")
    assert "owner" not in file.read_text()
    assert [r["user"] for r in read_audit(store.state)] == [store.actor.user]


def test_a_broken_policy_leaves_own_slots_editable_and_others_closed(tmp_path: Path) -> None:
    carol = editor(tmp_path, "carol", policy="admins: [carol]\nbogus: 1\n")
    with pytest.raises(NotYourSlot, match="the lab policy cannot be used"):
        carol.apply(Release("a1"), source="cli", confirmed=True)
    alice = editor(tmp_path, "alice")
    assert alice.apply(Release("a1"), source="cli", confirmed=True).status == "changed"


# --- the audit of loads, and the status filter -----------------------------------------------


def test_intent_changes_name_slots_and_groups() -> None:
    before = parse_desired(DESIRED)
    after = parse_desired(
        DESIRED.replace("want: held, owner: alice", "want: released").replace(
            "  - {name: free1, zone: us-central2-b, accelerator: v4-8, want: held}\n", ""
        )
    )
    assert intent_changes(before, after) == {
        "added": [],
        "removed": ["free1"],
        "changed": ["a1"],
        "groups_changed": [],
    }
    assert intent_changes(None, before)["added"] == ["a1", "free1", "c1", "c2"]


def test_only_owner_keeps_one_persons_slots_and_their_races() -> None:
    snap = StatusSnapshot(
        slots=(
            SlotStatus("a1", owner="alice"),
            SlotStatus("b1", owner="bob"),
            SlotStatus("c1", owner="alice", race_group="g"),
            SlotStatus("loose"),
        ),
        race_groups=(RaceGroupStatus("g", candidates=("c1", "x")), RaceGroupStatus("h")),
    )
    mine = only_owner(snap, "alice")
    assert [s.name for s in mine.slots] == ["a1", "c1"]
    assert [g.name for g in mine.race_groups] == ["g"]
    assert only_owner(snap, "dave").slots == ()
    assert owners(snap) == ("alice", "bob")


async def test_the_controller_audits_each_new_intent_with_the_files_owner(
    tmp_path: Path,
) -> None:
    from tests.support.fakecloud import FakeCloud
    from tests.unit.test_controller_passes import DESIRED as ONE_SLOT
    from tests.unit.test_controller_passes import make, settle

    c = make(tmp_path, FakeCloud(), ONE_SLOT)
    await c.reconcile()
    await c.reconcile()  # the same intent: nothing more
    path = tmp_path / "desired.yaml"
    path.write_text(ONE_SLOT.replace("want: held", "want: released"))  # by hand
    await c.reconcile()
    await settle(c)
    records = list(read_audit(c.state))
    me = os.geteuid()
    assert [(r["source"], r["file_uid"], r["added"], r["changed"]) for r in records] == [
        ("file", me, ["alpha"], []),
        ("file", me, [], ["alpha"]),
    ]
    assert records[1]["file_owner"] == pwd.getpwuid(me).pw_name
    from reconciler.runtime.events import read_events

    loads = [e for e in read_events(c.state.events) if e["kind"] == "desired.loaded"]
    assert [e["file_owner"] for e in loads] == [pwd.getpwuid(me).pw_name] * 2


def test_doctor_accepts_a_labs_state_directory_but_not_open_secrets() -> None:
    from reconciler.runtime.doctor import PathFacts, check_state_dir

    lab = PathFacts("/s", 1001, 0o2770, True)
    secrets = PathFacts("/s/secrets", 1001, 0o2700, True)
    assert check_state_dir("/s", [lab, secrets], 1002).status == "ok"  # a member, not its owner
    leaked = PathFacts("/s/secrets/tailscale", 1001, 0o640, False)
    failed = check_state_dir("/s", [lab, secrets, leaked], 1001)
    assert failed.status == "fail" and "/s/secrets/tailscale (0640)" in failed.detail
    private = PathFacts("/s", 1001, 0o770, True)  # group-open but not a lab's: as before
    assert check_state_dir("/s", [private], 1001).status == "warn"


def test_status_owner_and_list_slots_owner_show_one_persons_slots(tmp_path: Path) -> None:
    from reconciler.intent import views
    from tests.support.cli import run_cli

    bob = editor(tmp_path, "bob", policy=None)
    done = run_cli("-f", str(bob.path), "--state-dir", str(bob.state.root), "status",
                   "--owner", "alice", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert [(s["name"], s["owner"]) for s in shown["slots"]] == [
        ("a1", "alice"),
        ("c1", "alice"),
        ("c2", "alice"),
    ]
    listed = views.list_slots(bob, "alice")
    assert [(s["name"], s["owner"]) for s in listed["slots"]] == [
        ("a1", "alice"),
        ("c1", "alice"),
        ("c2", "alice"),
    ]
    assert [g["name"] for g in listed["race_groups"]] == ["g"]
    everyone = views.list_slots(bob)["slots"]
    assert [s.get("owner") for s in everyone] == ["alice", None, "alice", "alice"]


def test_the_tui_filter_owner_name_keeps_that_persons_rows() -> None:
    from reconciler.surfaces.tui._app import _matches
    from reconciler.surfaces.tui._frame import SlotRow

    mine, theirs = SlotRow("a1", owner="alice"), SlotRow("alice-ish", owner="bob")
    assert _matches(mine, "owner:alice") and not _matches(theirs, "owner:alice")
    assert _matches(theirs, "alice")  # plain text still looks in the name


def test_make_shared_lays_out_the_lab_and_keeps_secrets(tmp_path: Path) -> None:
    import grp

    from reconciler.adapters.lab_layout import make_shared
    from reconciler.adapters.secrets import SecretStore
    from reconciler.errors import ServiceError

    group = grp.getgrgid(os.getegid()).gr_name  # one's own group: no root needed
    state = StateDir(tmp_path / "state").ensure()
    atomic_write(state.status, "{}")
    SecretStore(state.secrets).set("tailscale", b"tskey-x")
    desired = tmp_path / "desired.yaml"
    desired.write_text("project: proj-1\n")
    desired.chmod(0o664)
    done = make_shared(state, group, admins=["carol"], desired=desired)
    assert done.policy_written and done.layout.moved == ("status.json",)
    assert state.lab and state.status == state.root / "controller" / "status.json"
    modes = {
        state.root: 0o3770,  # setgid, sticky: nobody renames another's entry
        state.private: 0o2750,  # the controller's alone; members read
        state.status: 0o640,
        state.intent_lock: 0o640,  # the controller's; members flock it read-only
        state.inbox: 0o3730,
        state.secrets / "tailscale": 0o600,
        policy_path(state): POLICY_MODE,
        desired: 0o644,  # its owner's alone to write
        tmp_path / "desired.d": 0o3770,  # each member's own file, in a sticky directory
    }
    assert {p: stat.S_IMODE(p.stat().st_mode) for p in modes} == modes
    assert read_policy(state) == Policy(admins=frozenset({"carol"}))
    atomic_write(policy_path(state), "admins: [dave]\n", mode=POLICY_MODE)
    assert not make_shared(state, group, admins=["carol"], desired=desired).policy_written
    assert read_policy(state).admins == frozenset({"dave"})  # its owner's edit is kept
    with pytest.raises(ServiceError, match="no group"):
        make_shared(state, "no-such-group-x", admins=[], desired=desired)


async def test_a_plan_only_controller_audits_nothing(tmp_path: Path) -> None:
    from tests.support.fakecloud import FakeCloud
    from tests.unit.test_controller_passes import make

    c = make(tmp_path, FakeCloud())
    c.allow_destructive = False  # as `plan` builds it
    await c.reconcile()
    assert list(read_audit(c.state)) == []


def test_the_status_table_has_an_owner_column_only_when_a_slot_has_an_owner() -> None:
    from reconciler.core.render import format_status, status_columns, status_rows

    lab = StatusSnapshot(slots=(SlotStatus("a1", owner="alice"), SlotStatus("loose")))
    assert status_columns(lab)[:3] == ("SLOT", "OWNER", "ZONE")
    assert [row[:2] for row in status_rows(lab, 0.0)] == [("a1", "alice"), ("loose", "-")]
    assert all(len(row) == len(status_columns(lab)) for row in status_rows(lab, 0.0))
    table = format_status(lab, 0.0).splitlines()
    header = next(line for line in table if line.startswith("SLOT"))
    assert header.split()[:3] == ["SLOT", "OWNER", "ZONE"]
    alone = StatusSnapshot(slots=(SlotStatus("loose"),))
    assert "OWNER" not in status_columns(alone)
    assert "OWNER" not in format_status(alone, 0.0)


def test_status_and_info_show_the_owner(tmp_path: Path) -> None:
    from tests.support.cli import run_cli

    bob = editor(tmp_path, "bob", policy=None)
    where = ("-f", str(bob.path), "--state-dir", str(bob.state.root))
    done = run_cli(*where, "status")
    assert done.returncode == 0, done.stderr
    header, *rows = [ln for ln in done.stdout.splitlines() if ln.startswith(("SLOT", "a1 "))]
    assert header.split()[:2] == ["SLOT", "OWNER"] and rows[0].split()[:2] == ["a1", "alice"]
    info = run_cli(*where, "info", "a1")
    assert info.returncode == 0, info.stderr
    assert "owner alice" in info.stdout.splitlines()
    as_json = json.loads(run_cli(*where, "info", "a1", "--json").stdout)
    assert as_json["owner"] == "alice"
