"""A lab member's file in the controller's place: known_hosts and memory.json owned by another
uid (chowned by this test, as root) are refused or ignored, and a member's confirmation — a
request in the lab's inbox — is judged by whose file it is and the lab's policy (model/trust),
with real files and the real controller and CLI code. The lab's older, flat layout is moved
into the new one. And the capacity history, which members read: as the system's daemon and
nobody users (forked from this test, as root). The attacks themselves, made by real users, are
``test_lab_attacks.py``."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.adapters.confirm_file import (
    accept,
    confirm_path,
    read_confirmed,
    take_requests,
    write_confirmation,
    write_request,
)
from reconciler.adapters.files import (
    READ_SHARED_DIR,
    READ_SHARED_FILE,
    SHARED_DIR,
    SHARED_FILE,
    read_jsonl,
)
from reconciler.adapters.history_db import HistoryDB, open_readonly
from reconciler.adapters.hostkeys import HostKey, HostKeyStore
from reconciler.adapters.lab import POLICY_MODE, policy_path
from reconciler.adapters.lab_layout import Layout, ensure_lab_layout
from reconciler.adapters.statedir import StateDir
from reconciler.core.control import confirmation
from reconciler.errors import UntrustedHostKeys
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog, read_events
from tests.support.fakecloud import FakeCloud
from tests.support.tools import require_root

#: A uid with no account here: a "member" other than the controller's user (root) and root.
MEMBER = 54321
MEMBER_NAME = f"uid{MEMBER}"
KEY = HostKey("ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl")
ALIAS = "tpu.n1.abc.w0"


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root("giving a file to another uid")


def _give(path: Path, uid: int = MEMBER) -> None:
    os.chown(path, uid, -1)


def test_a_members_known_hosts_is_refused_with_one_line_naming_it(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    store = HostKeyStore(state.known_hosts)
    assert not store.check_or_pin(ALIAS, KEY)  # the controller's own pin
    assert store.verify(ALIAS, KEY)
    _give(state.known_hosts)
    with pytest.raises(UntrustedHostKeys) as caught:
        store.pinned(ALIAS)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{state.known_hosts} is owned by {MEMBER_NAME}, not by the")
    for call in (lambda: store.verify(ALIAS, KEY), lambda: store.check_or_pin(ALIAS, KEY)):
        with pytest.raises(UntrustedHostKeys):
            call()
    _give(state.known_hosts, 0)  # given back: trusted again
    assert store.verify(ALIAS, KEY)


def test_a_symlinked_known_hosts_is_not_followed(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    elsewhere = tmp_path / "mine"
    elsewhere.write_text(f"{ALIAS} {KEY.key_type} {KEY.base64}\n")
    state.known_hosts.symlink_to(elsewhere)
    with pytest.raises(UntrustedHostKeys, match="is a symbolic link"):
        HostKeyStore(state.known_hosts).verify(ALIAS, KEY)


def _controller(tmp_path: Path, state: StateDir) -> Controller:
    path = tmp_path / "desired.yaml"
    path.write_text("project: test-project\nslots: []\n")
    return Controller(
        store=DesiredLoader(path, {}),
        state=state,
        cloud_factory=lambda d: FakeCloud(),  # type: ignore[arg-type,return-value]
        events=EventLog(state),
    )


def test_a_members_memory_is_not_trusted_and_is_reported(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    state.memory.write_text(json.dumps({"version": 1, "slots": {"planted": {}}}))
    _give(state.memory)
    c = _controller(tmp_path, state)
    assert not c.memory.slots
    [event] = [e for e in read_events(state.events) if e.get("kind") == "memory.untrusted"]
    assert f"is owned by {MEMBER_NAME}" in event["error"]


def _shared_lab(tmp_path: Path) -> StateDir:
    """A lab's state directory laid out by its controller's user (root, here)."""
    state = StateDir(tmp_path / "state").ensure()
    state.root.chmod(SHARED_DIR)
    ensure_lab_layout(state)
    policy = policy_path(state)
    policy.write_text("admins: [carol]\nedit_others: false\ncaps: {}\n")
    policy.chmod(POLICY_MODE)
    return state


OWNERS = {"mine": MEMBER_NAME, "alices": "alice"}


def _members_request(
    state: StateDir, deletes: list[str], *, user: str = MEMBER_NAME, uid: int = MEMBER
) -> Path:
    """A member's confirmation request in the inbox, as ``write_request`` leaves it, theirs."""
    document = {**confirmation(deletes, digest="d1", now=1000.0), "user": user}
    path = write_request(state, document)
    _give(path, uid)
    return path


def test_a_members_request_counts_only_for_their_own_slots(tmp_path: Path) -> None:
    state = _shared_lab(tmp_path)
    _members_request(state, ["z/mine@1"])
    [own] = take_requests(state, owners=OWNERS)
    assert (own.user, own.reason, own.deletes) == (MEMBER_NAME, None, ["z/mine@1"])
    accept(state, own)  # the controller's own file now, naming who asked
    document = json.loads(state.confirm.read_text())
    assert (document["user"], document["requested_by"]) == ("root", MEMBER_NAME)
    assert read_confirmed(state, digest="d1", now=1001.0, owners=OWNERS) == {"z/mine@1"}

    _members_request(state, ["z/mine@1", "z/alices@2"])
    [theirs] = take_requests(state, owners=OWNERS)
    assert theirs.reason is not None and "slot 'alices' belongs to alice" in theirs.reason
    assert list(state.inbox.iterdir()) == []  # taken, judged, removed


def test_a_request_claiming_another_user_counts_for_nothing(tmp_path: Path) -> None:
    state = _shared_lab(tmp_path)
    _members_request(state, ["z/mine@1"], user="carol")  # the admin's name, the member's file
    [request] = take_requests(state, owners=OWNERS)
    assert request.reason is not None
    assert f"names 'carol' but is owned by {MEMBER_NAME}" in request.reason


def test_a_request_that_is_a_link_a_fifo_or_the_controllers_is_refused(tmp_path: Path) -> None:
    state = _shared_lab(tmp_path)
    linked = _members_request(state, ["z/mine@1"])
    os.link(linked, state.root / "elsewhere")
    os.symlink(state.memory, state.inbox / "confirm-link.json")
    os.mkfifo(state.inbox / "confirm-fifo.json")  # never waited on
    mine = _members_request(state, ["z/mine@1"], uid=0)  # the controller's user writes directly
    reasons = {r.path.name: r.reason for r in take_requests(state, owners=OWNERS)}
    assert reasons.keys() == {linked.name, "confirm-link.json", "confirm-fifo.json", mine.name}
    assert "has 2 names (a hard link)" in (reasons[linked.name] or "")
    assert "is a symbolic link" in (reasons["confirm-link.json"] or "")
    assert "is not a regular file" in (reasons["confirm-fifo.json"] or "")
    assert "confirms in the controller's own directory" in (reasons[mine.name] or "")
    assert not state.confirm.exists()


def test_the_controllers_own_confirmation_counts_for_every_slot(tmp_path: Path) -> None:
    state = _shared_lab(tmp_path)
    deletes = ["z/mine@1", "z/alices@2", "z/gone@3"]
    write_confirmation(state, deletes, digest="d1", now=1000.0)  # root: straight into controller/
    assert confirm_path(state).parent == state.private
    assert read_confirmed(state, digest="d1", now=1001.0, owners=OWNERS) == frozenset(deletes)


def test_an_older_flat_lab_is_moved_into_the_new_layout(tmp_path: Path) -> None:
    """A lab of the older layout (everything group-writable at the top): its controller's own
    files move into controller/, one a member owns stays behind unused, the shared lock and
    confirmation a member may have made go, a controller/ a member made is set aside."""
    state = StateDir(tmp_path / "state").ensure()
    state.root.chmod(SHARED_DIR)
    for name in ("status.json", "events.jsonl", "known_hosts", "history.sqlite", "confirm.json"):
        (state.root / name).write_text("{}")
        (state.root / name).chmod(SHARED_FILE)
    (state.root / "memory.json").write_text("{}")
    _give(state.root / "memory.json")  # a member's: not moved, not used
    (state.root / "intent.lock").touch()
    (state.root / "controller").mkdir()
    _give(state.root / "controller")
    layout = ensure_lab_layout(state)
    assert layout.moved == ("events.jsonl", "history.sqlite", "known_hosts", "status.json")
    assert layout.left == ("memory.json",)
    assert layout.removed == ("intent.lock", "confirm.json")
    assert [n.startswith("controller.untrusted-") for n in layout.set_aside] == [True]
    assert state.lab and state.known_hosts.parent == state.root / "controller"
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in state.private.iterdir()}
    assert modes == dict.fromkeys(
        ["events.jsonl", "history.sqlite", "known_hosts", "status.json", "intent.lock"], 0o640
    )
    assert stat.S_IMODE(state.root.stat().st_mode) == 0o3770
    assert stat.S_IMODE(state.private.stat().st_mode) == 0o2750
    assert stat.S_IMODE(state.inbox.stat().st_mode) == 0o3730
    assert ensure_lab_layout(state) == Layout(left=("memory.json",))  # idempotent


def _as(uid: int, gid: int, work: Callable[[], str]) -> str:
    """``work()`` in a forked child run as ``uid``/``gid`` (no other groups): its result, or
    the error it raised, as text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            said = work()
        except BaseException as e:  # anything goes back to the parent
            said = f"error: {type(e).__name__}: {e}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        said = f.read().decode()
    os.waitpid(pid, 0)
    return said


@dataclass(frozen=True)
class RealLab:
    """A lab's state directory of real system users: ``controller`` (daemon) owns it, and
    ``member`` (nobody) is in its group, which the controller runs with too."""

    root: Path
    controller: pwd.struct_passwd
    member: pwd.struct_passwd

    @property
    def gid(self) -> int:
        return self.member.pw_gid


@pytest.fixture
def real_lab() -> Iterator[RealLab]:
    """A lab's controller directory (2750): the controller's user writes, the group reads."""
    controller, member = pwd.getpwnam("daemon"), pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="tr-lab-files-"))  # outside root's 0700 pytest dirs
    try:
        base.chmod(0o755)
        root = base / "controller"
        root.mkdir()
        os.chown(root, controller.pw_uid, member.pw_gid)
        root.chmod(READ_SHARED_DIR)
        yield RealLab(root, controller, member)
    finally:
        shutil.rmtree(base)


def test_lab_members_read_the_history_and_the_controller_still_writes_it(
    real_lab: RealLab,
) -> None:
    """Members read the store in a directory they cannot write: while the controller is
    stopped (as an immutable file: no -wal) and while it has it open (its -wal and -shm, read
    only), and the controller writes on after their reads."""
    controller, member, gid = real_lab.controller, real_lab.member, real_lab.gid
    path = real_lab.root / "history.sqlite"

    def write() -> str:
        db = HistoryDB(path)
        db.set_meta("written_by", str(os.getuid()))
        db.close()
        return "written"

    def read() -> str:
        db = open_readonly(path)
        assert db is not None
        said = str(db.read_meta("written_by"))
        db.close()
        return said

    assert _as(controller.pw_uid, gid, write) == "written"
    assert stat.S_IMODE(path.stat().st_mode) == READ_SHARED_FILE  # 0640: the group reads it
    assert _as(member.pw_uid, gid, read) == str(controller.pw_uid)  # stopped: no -wal
    assert _as(controller.pw_uid, gid, write) == "written"  # not locked out
    assert _as(member.pw_uid, gid, read) == str(controller.pw_uid)

    def read_while_open() -> str:
        with os.fdopen(ready_w, "w") as ready, os.fdopen(done_r) as done:
            db = HistoryDB(path)  # the controller's user holds it open: -wal, -shm there
            db.set_meta("written_by", "running")
            ready.write("x")
            ready.flush()
            done.read(1)
            db.close()
        return "closed"

    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the writer, as the controller's user
        os.close(ready_r)
        os.close(done_w)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(controller.pw_uid)
        read_while_open()
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    with os.fdopen(ready_r) as ready, os.fdopen(done_w, "w") as done:
        ready.read(1)
        assert Path(f"{path}-wal").exists()
        assert _as(member.pw_uid, gid, read) == "running"
        done.write("x")
    os.waitpid(pid, 0)


def test_the_history_stays_private_outside_a_lab(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    HistoryDB(state.root / "history.sqlite").close()
    assert stat.S_IMODE((state.root / "history.sqlite").stat().st_mode) == 0o600


async def test_the_controller_refuses_a_members_confirmation_of_anothers_slot(
    tmp_path: Path,
) -> None:
    state = _shared_lab(tmp_path)
    c = _controller(tmp_path, state)
    (tmp_path / "desired.yaml").write_text(
        "project: test-project\nslots:\n  - {name: alices, zone: us-central2-b, accelerator: v4-8, "
        "want: released, owner: alice}\n"
    )
    _members_request(state, ["us-central2-b/alices@1"])
    await c.reconcile()
    [event] = [e for e in read_events(state.events) if e.get("kind") == "confirm.refused"]
    assert event["user"] == MEMBER_NAME
    assert "slot 'alices' belongs to alice" in event["error"]
    assert list(state.inbox.iterdir()) == [] and not confirm_path(state).exists()
    [record] = [r for r in read_jsonl(state.controller_audit) if r["source"] == "confirm"]
    assert (record["user"], record["kind"]) == (MEMBER_NAME, "confirm.refused")


def test_a_lab_members_process_never_writes_the_controllers_pins(real_lab: RealLab) -> None:
    controller, member = real_lab.controller, real_lab.member
    hosts = real_lab.root / "known_hosts"
    hosts.write_text(f"{ALIAS} {KEY.key_type} {KEY.base64}\n")
    os.chown(hosts, controller.pw_uid, member.pw_gid)
    hosts.chmod(READ_SHARED_FILE)
    store = HostKeyStore(hosts)
    other = "tpu.n2.abc.w0"

    def member_pins() -> str:
        known = store.verify(ALIAS, KEY)  # the controller's pins are read
        return f"{known} {store.check_or_pin(other, KEY)} {store.forget('n1@abc')}"

    assert _as(member.pw_uid, member.pw_gid, member_pins) == "True False 1"
    assert hosts.stat().st_uid == controller.pw_uid  # still the controller's file
    assert hosts.read_text() == f"{ALIAS} {KEY.key_type} {KEY.base64}\n"


def test_ssh_and_the_tmux_windows_refuse_a_members_known_hosts(tmp_path: Path) -> None:
    """OpenSSH reads known_hosts without asking whose it is: the command views and the
    controller's tmux windows check first (``hostkeys.check_trusted``)."""
    from reconciler.adapters.files import write_json
    from reconciler.adapters.hostkeys import check_trusted
    from reconciler.errors import ViewError
    from reconciler.intent import views
    from reconciler.intent.engine import IntentEditor
    from tests.unit.test_intent_views import row, snapshot

    file = tmp_path / "desired.yaml"
    file.write_text("project: test-project\nslots: []\nsettings: {ssh_user: alice}\n")
    store = IntentEditor(file, StateDir(tmp_path / "state").ensure(), env={})
    write_json(store.state.status, snapshot(row("small", "ACTIVE", ips=["10.0.0.5"],
               instance="small@12345")))  # fmt: skip
    check_trusted(store.state.known_hosts)  # none yet: nothing to refuse
    assert views.ssh_command(store, "small")["available"]
    store.state.known_hosts.write_text(f"{ALIAS} {KEY.key_type} {KEY.base64}\n")
    check_trusted(store.state.known_hosts)  # the controller's own
    _give(store.state.known_hosts)
    with pytest.raises(UntrustedHostKeys, match=f"owned by {MEMBER_NAME}"):
        check_trusted(store.state.known_hosts)
    with pytest.raises(ViewError, match=f"known_hosts is owned by {MEMBER_NAME}"):
        views.ssh_command(store, "small")
