"""A lab sharing one controller, with real Unix users: three users this test creates (as root,
``useradd``; removed afterwards) in a group of their own edit one desired file through the CLI,
each run with ``runuser`` on one shared state directory that ``service install --shared`` set
up. Each edit records its owner; bob's release of alice's slot is refused and says whose it
is; carol, an admin, may; the audit names every one of them.

The test's own interpreter lives in root's home, which the users cannot enter: they run the
system's ``/usr/bin/python3`` in a virtual environment of its own, in a world-readable temp
directory, with this package installed into it (built once per session).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.exitcodes import EX_NOPERM, EX_OK
from tests.support.tools import in_ci, require_tool

ROOT = Path(__file__).resolve().parents[2]
#: Building the users' virtual environment takes 30-60 s, more on a loaded machine.
pytestmark = pytest.mark.slow

SYSTEM_PYTHON = "/usr/bin/python3"
DESIRED = "project: proj-1\nslots: []\n"


def _require_root() -> None:
    if os.geteuid() != 0:
        message = "creating Unix users needs root"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)


def _require_system_python() -> None:
    probe = [SYSTEM_PYTHON, "-c", "import sys, venv; print(sys.version_info >= (3, 11))"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=False)
        ok, said = done.stdout.strip() == "True", done.stdout + done.stderr
    except OSError as e:
        ok, said = False, e.strerror or str(e)
    if not ok:
        message = f"{SYSTEM_PYTHON} is not a Python 3.11+ with venv: {said}"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def lab_python() -> Iterator[Path]:
    """An interpreter every user may run, with this package installed (built once)."""
    _require_root()
    _require_system_python()
    base = Path(tempfile.mkdtemp(prefix="tr-lab-venv-"))
    try:
        base.chmod(0o755)
        venv = base / "venv"
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True, timeout=300)
        python = venv / "bin" / "python"
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-input", str(ROOT)],
            check=True,
            timeout=900,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        yield python
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True)
class Lab:
    group: str
    alice: str
    bob: str
    carol: str  # the lab's admin
    home: Path  # world-traversable; one home directory per user below it
    desired: Path
    state: Path
    python: Path

    def run(self, user: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``tpu-reconciler -f desired --state-dir state ARGS`` as ``user``, with a clean
        environment (their own home, none of root's settings)."""
        home = self.home / user
        env = [
            f"PATH={self.python.parent}:/usr/bin:/bin",
            f"HOME={home}",
            f"XDG_CONFIG_HOME={home}/.config",
            "LANG=C.UTF-8",
        ]
        argv = [str(self.python), "-m", "reconciler", "-f", str(self.desired)]
        argv += ["--state-dir", str(self.state), *args]
        return subprocess.run(
            ["runuser", "-u", user, "--", "/usr/bin/env", "-i", *env, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=home,
        )


def _quietly(*argv: str) -> None:
    subprocess.run(argv, capture_output=True, timeout=60, check=False)


@pytest.fixture
def lab(lab_python: Path) -> Iterator[Lab]:
    for tool in ("useradd", "userdel", "groupadd", "groupdel", "runuser"):
        require_tool(tool)
    tag = os.urandom(3).hex()
    group, users = f"trlab{tag}", [f"tra{tag}", f"trb{tag}", f"trc{tag}"]
    base = Path(tempfile.mkdtemp(prefix="tr-lab-"))
    made: list[str] = []
    try:
        base.chmod(0o755)
        subprocess.run(["groupadd", group], check=True, capture_output=True, timeout=60)
        for user in users:
            subprocess.run(
                ["useradd", "-M", "-N", "-g", group, "-d", str(base / user), user],
                check=True,
                capture_output=True,
                timeout=60,
            )
            made.append(user)
            (base / user).mkdir(mode=0o700)
            shutil.chown(base / user, user, group)
        shared = base / "lab"
        shared.mkdir()
        shutil.chown(shared, users[0], group)
        shared.chmod(0o2770)  # the lab's directory: members' edits save desired.yaml here
        desired = shared / "desired.yaml"
        desired.write_text(DESIRED)
        shutil.chown(desired, users[0], group)
        desired.chmod(0o660)
        alice, bob, carol = users
        yield Lab(group, alice, bob, carol, base, desired, shared / "state", lab_python)
    finally:
        for user in made:
            _quietly("userdel", user)
        _quietly("groupdel", group)
        shutil.rmtree(base, ignore_errors=True)


def _owners(desired: Path) -> dict[str, str | None]:
    from reconciler.model.load import parse_desired

    return {s.name: s.owner for s in parse_desired(desired.read_text()).slots}


def test_two_users_edit_one_shared_lab_and_the_audit_names_them(lab: Lab) -> None:
    done = lab.run(lab.alice, "service", "install", "--shared", lab.group, "--admin", lab.carol)
    assert done.returncode == EX_OK, done.stderr
    assert f"belongs to group {lab.group}" in done.stdout
    st = lab.state.stat()
    assert stat.S_IMODE(st.st_mode) == 0o2770 and st.st_gid == grp.getgrnam(lab.group).gr_gid
    policy = lab.state / "policy.yaml"
    assert pwd.getpwuid(policy.stat().st_uid).pw_name == lab.alice
    assert stat.S_IMODE(policy.stat().st_mode) == 0o640

    add = ("add-slot", "--zone", "us-central2-b", "--accelerator", "v4-8", "--name")
    done = lab.run(lab.alice, *add, "a1")
    assert done.returncode == EX_OK, done.stderr
    done = lab.run(lab.bob, *add, "b1")  # bob's edit, with the lock alice's edit created
    assert done.returncode == EX_OK, done.stderr
    assert _owners(lab.desired) == {"a1": lab.alice, "b1": lab.bob}

    refused = lab.run(lab.bob, "release", "a1", "--yes")
    assert refused.returncode == EX_NOPERM
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert f"slot 'a1' belongs to {lab.alice}, not to {lab.bob}" in lines[0]
    assert lab.carol in lines[0]  # who could
    assert "want: held" in lab.desired.read_text()  # nothing written

    done = lab.run(lab.carol, "release", "a1", "--yes")
    assert done.returncode == EX_OK, done.stderr
    assert _owners(lab.desired)["a1"] == lab.alice  # an admin's edit does not take it over
    done = lab.run(lab.bob, "release", "b1", "--yes")  # his own
    assert done.returncode == EX_OK, done.stderr

    audit = [json.loads(line) for line in (lab.state / "audit.jsonl").read_text().splitlines()]
    made = [(r["user"], r["kind"], r["args"]["name"]) for r in audit]
    assert made == [
        (lab.alice, "add_slot", "a1"),
        (lab.bob, "add_slot", "b1"),
        (lab.carol, "release", "a1"),
        (lab.bob, "release", "b1"),
    ]
    assert [r["uid"] for r in audit] == [
        pwd.getpwnam(u).pw_uid for u in (lab.alice, lab.bob, lab.carol, lab.bob)
    ]
    audit_stat = (lab.state / "audit.jsonl").stat()
    assert stat.S_IMODE(audit_stat.st_mode) == 0o660
    assert stat.S_IMODE((lab.state / "intent.lock").stat().st_mode) == 0o660

    shown = lab.run(lab.bob, "status", "--owner", lab.alice, "--json")
    assert shown.returncode == EX_OK, shown.stderr
    slots = json.loads(shown.stdout)["slots"]
    assert [(s["name"], s["owner"]) for s in slots] == [("a1", lab.alice)]


def test_the_package_under_test_is_the_worktrees(lab_python: Path) -> None:
    """The users' interpreter runs this checkout's code, not an older install."""
    done = subprocess.run(
        [str(lab_python), "-c", "import reconciler.intent.owners, reconciler.adapters.lab"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_members_see_owners_and_read_the_labs_history(lab: Lab) -> None:
    """The status table's OWNER column, and the capacity history a member reads (``history``)
    while the controller's user still writes it after that read."""
    done = lab.run(lab.alice, "service", "install", "--shared", lab.group, "--admin", lab.carol)
    assert done.returncode == EX_OK, done.stderr
    add = ("add-slot", "--zone", "us-central2-b", "--accelerator", "v4-8", "--name")
    assert lab.run(lab.bob, *add, "b1").returncode == EX_OK
    shown = lab.run(lab.alice, "status")
    assert shown.returncode == EX_OK, shown.stderr
    table = [line.split() for line in shown.stdout.splitlines()]
    assert ["SLOT", "OWNER"] in [row[:2] for row in table]
    assert ["b1", lab.bob] in [row[:2] for row in table]

    history = lab.state / "history.sqlite"
    write = (
        "import sys, pathlib; from reconciler.adapters.history_db import HistoryDB; "
        "db = HistoryDB(pathlib.Path(sys.argv[1])); db.set_meta('by', 'controller'); db.close()"
    )

    def as_controller() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runuser", "-u", lab.alice, "--", str(lab.python), "-c", write, str(history)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = as_controller()
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(history.stat().st_mode) == 0o660
    read = lab.run(lab.bob, "history")  # the controller is not running: bob makes -wal, -shm
    assert read.returncode == EX_OK, read.stderr
    done = as_controller()
    assert done.returncode == 0, done.stderr  # not locked out by bob's files
