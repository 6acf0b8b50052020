"""A lab sharing one controller, with real Unix users and the package installed as users install
it (``pip install`` into a virtual environment of the system's ``/usr/bin/python3``, built once
per module; slow). Four users this test creates (as root, ``useradd``; removed afterwards) in a
group of their own: ``ctl`` sets the lab up (``service install --shared``) and is its admin,
``alice`` and ``bob`` are members, ``carol`` is named an admin in the policy.

Each member's edit lands in their own file (``desired.d/<user>.yaml``), made theirs; bob's
release of alice's slot is refused and says whose it is; so is carol's, an admin who is not
root (only root writes another's file, and leaves it theirs); a lab-wide setting is the shared
file's owner's; the audit names every edit's user and file. The attacks members could make
are ``test_lab_attacks.py`` (fast, a copied interpreter).
"""

from __future__ import annotations

import json
import pwd
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.exitcodes import EX_NOPERM, EX_OK
from reconciler.runtime.desired_loader import DesiredLoader
from tests.support.lab_users import Lab, Users, installed_python, lab_users, new_lab

#: Building the users' virtual environment takes 30-60 s, more on a loaded machine.
pytestmark = pytest.mark.slow

DESIRED = "project: proj-1\nslots: []\n"
ADD = ("add-slot", "--zone", "us-central2-b", "--accelerator", "v4-8", "--name")


@pytest.fixture(scope="module")
def users() -> Iterator[Users]:
    with lab_users(["ctl", "alice", "bob", "carol"], build=installed_python) as made:
        yield made


@pytest.fixture
def lab(users: Users) -> Lab:
    made = new_lab(users, DESIRED)
    ctl, carol = users.names[0], users.names[3]
    done = made.run(ctl, "service", "install", "--shared", users.group, "--admin", ctl,
                    "--admin", carol, "--allow-emulator")  # fmt: skip
    assert done.returncode == EX_OK, done.stderr
    assert f"belongs to group {users.group}" in done.stdout
    return made


def _owners(lab: Lab) -> dict[str, str | None]:
    desired = DesiredLoader(lab.desired).load().desired
    assert desired is not None
    return {s.name: s.owner for s in desired.slots}


def test_members_edit_their_own_files_and_the_audit_names_them(lab: Lab) -> None:
    ctl, alice, bob, carol = lab.users.names
    st = lab.state.stat()
    assert stat.S_IMODE(st.st_mode) == 0o3770
    policy = lab.state / "policy.yaml"
    assert pwd.getpwuid(policy.stat().st_uid).pw_name == ctl
    assert stat.S_IMODE(policy.stat().st_mode) == 0o640

    assert lab.run(alice, *ADD, "a1").returncode == EX_OK
    assert lab.run(bob, *ADD, "b1").returncode == EX_OK  # with the lock the install made
    assert _owners(lab) == {"a1": alice, "b1": bob}
    for user in (alice, bob):
        made = lab.members / f"{user}.yaml"
        assert pwd.getpwuid(made.stat().st_uid).pw_name == user
        assert stat.S_IMODE(made.stat().st_mode) == 0o640

    for who in (bob, carol):  # a member, and an admin who is not root
        refused = lab.run(who, "release", "a1", "--yes")
        assert refused.returncode == EX_NOPERM
        lines = refused.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
        assert f"slot 'a1' belongs to {alice}, not to {who}" in lines[0]
    assert "want: held" in (lab.members / f"{alice}.yaml").read_text()  # nothing written
    refused = lab.run(bob, "suspend")
    assert refused.returncode == EX_NOPERM and "lab-wide settings" in refused.stderr
    assert lab.run(ctl, "set-poll", "--interval", "1m").returncode == EX_OK  # the admin's

    done = subprocess.run(  # root may change a member's file, and it stays theirs
        [str(lab.users.python), "-m", "reconciler", "-f", str(lab.desired), "--state-dir",
         str(lab.state), "release", "a1", "--yes"],
        capture_output=True, text=True, timeout=120, check=False, cwd="/",
    )  # fmt: skip
    assert done.returncode == EX_OK, done.stderr
    assert pwd.getpwuid((lab.members / f"{alice}.yaml").stat().st_uid).pw_name == alice
    assert _owners(lab)["a1"] == alice
    assert lab.run(bob, "release", "b1", "--yes").returncode == EX_OK  # his own

    audit = [json.loads(line) for line in (lab.state / "audit.jsonl").read_text().splitlines()]
    made = [(r["user"], r["kind"], r["args"].get("name"), Path(r["file"]).name) for r in audit]
    assert made == [
        (alice, "add_slot", "a1", f"{alice}.yaml"),
        (bob, "add_slot", "b1", f"{bob}.yaml"),
        (ctl, "set_poll", None, "desired.yaml"),
        ("root", "release", "a1", f"{alice}.yaml"),
        (bob, "release", "b1", f"{bob}.yaml"),
    ]
    assert stat.S_IMODE((lab.state / "audit.jsonl").stat().st_mode) == 0o660
    assert stat.S_IMODE((lab.state / "controller" / "intent.lock").stat().st_mode) == 0o640

    shown = lab.run(bob, "status", "--owner", alice, "--json")
    assert shown.returncode == EX_OK, shown.stderr
    slots = json.loads(shown.stdout)["slots"]
    assert [(s["name"], s["owner"]) for s in slots] == [("a1", alice)]


def test_the_package_under_test_is_the_worktrees(users: Users) -> None:
    """The users' interpreter runs this checkout's code, not an older install."""
    probe = "import reconciler.intent.lab_files, reconciler.adapters.lab_layout"
    done = subprocess.run(
        [str(users.python), "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_members_see_owners_and_read_the_labs_history(lab: Lab) -> None:
    """The status table's OWNER column, and the capacity history a member reads (``history``)
    from the controller's directory, which only the controller's user writes."""
    ctl, alice, bob, _ = lab.users.names
    assert lab.run(bob, *ADD, "b1").returncode == EX_OK
    shown = lab.run(alice, "status")
    assert shown.returncode == EX_OK, shown.stderr
    table = [line.split() for line in shown.stdout.splitlines()]
    assert ["SLOT", "OWNER"] in [row[:2] for row in table]
    assert ["b1", bob] in [row[:2] for row in table]

    history = lab.state / "controller" / "history.sqlite"
    write = (
        "import sys, pathlib; from reconciler.adapters.history_db import HistoryDB; "
        "db = HistoryDB(pathlib.Path(sys.argv[1])); db.set_meta('by', 'controller'); db.close()"
    )
    done = lab.sh(ctl, str(lab.users.python), "-c", write, str(history))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(history.stat().st_mode) == 0o640
    read = lab.run(bob, "history")  # the controller is not running: read as it was left
    assert read.returncode == EX_OK, read.stderr
    done = lab.sh(ctl, str(lab.users.python), "-c", write, str(history))
    assert done.returncode == 0, done.stderr  # not locked out by bob's read
