"""A lab that holds against its own members (issue 30), tried with real Unix users.

Three users this module creates once (as root, ``useradd``; removed afterwards) share one lab
that ``service install --shared`` set up: ``ctl`` runs the controller (and is the lab's admin),
``alice`` and ``bob`` are members. Each test is one attack a member could make before, made by a
real member process with the tools a member has (``ln``, ``mv``, ``chmod``, a shell's ``>``, an
editor's save), followed by what the controller then does: the kernel refuses the attack, or the
controller refuses what it produced, reports it and keeps running. docs/reliability.md names
each test with its number of trials.

The controller is the real CLI (``apply``: one pass; ``run`` for the one test about a running
controller) against the emulator, as ``ctl``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.emulator import Emulator
from reconciler.exitcodes import EX_NOPERM, EX_OK, EX_REFUSED
from tests.support.lab_users import Lab, Users, lab_users, new_lab

pytestmark = pytest.mark.integration

DESIRED = """\
project: test-project
settings: {backend: rest, poll_interval: 2s, fast_poll_interval: 1s, delete_guard: 2}
defaults: {setup: {tmux: false}}
slots: []
"""
ZONE = "us-central2-b"


@pytest.fixture(scope="module")
def users() -> Iterator[Users]:
    with lab_users(["ctl", "alice", "bob"]) as made:
        yield made


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    emulator = Emulator().start()
    yield emulator
    emulator.stop()


@pytest.fixture
def lab(users: Users, emu: Emulator) -> Iterator[Lab]:
    """A fresh lab set up by its controller's user, pointed at the emulator."""
    made = new_lab(users, DESIRED)
    ctl = users.names[0]
    token = made.base / "token"
    token.write_text("emulator-token\n")
    token.chmod(0o644)
    config = made.base / "gcloud"
    config.mkdir()
    shutil.chown(config, ctl, users.group)
    made.env = emu.gcloud_env(str(config), str(token), "test-project")
    done = made.run(ctl, "service", "install", "--shared", users.group, "--allow-emulator")
    assert done.returncode == EX_OK, done.stderr
    try:
        yield made
    finally:
        shutil.rmtree(made.base, ignore_errors=True)


def _slots(names: list[str], want: str) -> str:
    return "slots:\n" + "".join(
        f"  - {{name: {n}, zone: {ZONE}, accelerator: v4-8, want: {want}}}\n" for n in names
    )


def _qrs(emu: Emulator, names: list[str]) -> dict[str, str]:
    found = {q["name"].rsplit("/", 1)[-1]: q["state"]["state"] for q in emu.queued_resources()}
    return {n: found.get(n, "gone") for n in names}


def _events(lab: Lab, kind: str) -> list[dict[str, Any]]:
    path = lab.state / "controller" / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("kind") == kind]


def _audit(lab: Lab) -> list[dict[str, Any]]:
    path = lab.state / "controller" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_forged_confirmations_by_hard_link_and_rename_delete_nothing(
    lab: Lab, emu: Emulator
) -> None:
    """Before: ``ln memory.json confirm.json`` (or a rename of any controller file onto it)
    gave alice a confirmation owned by the controller's user, and bob's three ACTIVE TPUs were
    deleted. Now the controller's files are out of her reach, a request is judged by its
    file's owner and link count, and only bob's own confirmation lets his deletes through."""
    ctl, alice, bob = lab.users.names
    mine = [f"b{i}" for i in (1, 2, 3)]
    for name in mine:
        emu.add_queued_resource(ZONE, name, state="ACTIVE", labels={"managed-by": "tpu-reconciler"})
    lab.write_as(bob, lab.members / f"{bob}.yaml", _slots(mine, "released"))
    held = lab.run(ctl, "apply", "--yes")
    assert held.returncode == EX_OK, held.stderr
    assert "delete guard: this change deletes 3 ACTIVE TPUs" in held.stdout
    refused = lab.run(alice, "confirm")
    assert refused.returncode == EX_NOPERM, refused.stderr
    assert f"slot 'b1' belongs to {bob}, not to {alice}" in refused.stderr

    state, inbox = lab.state, lab.state / "inbox"
    own = [p for p in (state / "controller").iterdir() if p.is_file()]
    own += [state / "audit.jsonl", state / "policy.yaml"]
    made = []
    for i, source in enumerate(own):
        for verb in ("ln", "mv"):
            for target in (inbox / f"confirm-{alice}-{verb}{i}.json", state / "confirm.json"):
                done = lab.sh(alice, verb, str(source), str(target))
                if done.returncode == 0:
                    made.append((verb, source.name, target.name))
    # the one file a member may both read and write, the edits' audit log, can be linked (the
    # kernel allows a link to what one may write): the link is refused by the controller
    assert {(verb, source) for verb, source, _ in made} == {("ln", "audit.jsonl")}
    forged = json.dumps({"deletes": mine, "user": ctl})
    lab.sh(alice, "/bin/sh", "-c", f"printf '%s' '{forged}' > {state / 'audit.jsonl'}")
    # and a request of her own that claims to be the controller's user's
    lab.sh(alice, "/bin/sh", "-c", f"echo '{forged}' > {inbox}/confirm-{alice}-own.json")

    after = lab.run(ctl, "apply", "--yes")
    assert after.returncode == EX_OK, after.stderr
    assert _qrs(emu, mine) == dict.fromkeys(mine, "ACTIVE")
    refusals = [e["error"] for e in _events(lab, "confirm.refused")]
    assert any("names (a hard link)" in r for r in refusals), refusals
    assert any(f"names {ctl!r} but is owned by {alice}" in r for r in refusals), refusals
    assert list(inbox.iterdir()) == []  # every request taken and removed

    done = lab.run(bob, "confirm", "--yes")  # his own: an inbox request, his by the kernel
    assert done.returncode == EX_OK, done.stderr
    applied = lab.run(ctl, "apply", "--yes")
    assert applied.returncode == EX_OK, applied.stderr
    assert set(_qrs(emu, mine).values()) <= {"DELETING", "gone"}
    [accepted] = _events(lab, "confirm.accepted")
    assert accepted["user"] == bob
    assert [(r["user"], r["kind"]) for r in _audit(lab) if r["source"] == "confirm"][-1] == (
        bob,
        "confirm.accepted",
    )


def test_a_rewritten_pin_is_never_trusted(lab: Lab) -> None:
    """Before: known_hosts was 0660, a member rewrote a pin in place and the controller
    trusted their key (``doctor`` said ok). Now she cannot write, link or replace it; and a pins
    file others could write (a hand chmod) is refused by the controller and by ``doctor``."""
    ctl, alice, _ = lab.users.names
    pins = lab.state / "controller" / "known_hosts"
    key = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    pin = (
        "import sys; from pathlib import Path; from reconciler.adapters.hostkeys import "
        "HostKey, HostKeyStore as S; s = S(Path(sys.argv[1])); "
        f"k = HostKey('ssh-ed25519', '{key}'); "
        "print(s.check_or_pin('tpu.n1.abc.w0', k) if sys.argv[2] == 'pin' else "
        "s.verify('tpu.n1.abc.w0', k))"
    )
    done = lab.sh(ctl, str(lab.users.python), "-c", pin, str(pins), "pin")
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
    assert stat.S_IMODE(pins.stat().st_mode) == 0o640
    theirs = f"tpu.n1.abc.w0 ssh-ed25519 {key[:-8]}FORGED00\n"
    attempts = [
        ["/bin/sh", "-c", f"printf '{theirs}' > {pins}"],  # in place
        ["/bin/sh", "-c", f"printf '{theirs}' > {pins}.new && mv {pins}.new {pins}"],
        ["ln", "-f", str(lab.members), str(pins)],
        ["rm", "-f", str(pins)],
    ]
    for argv in attempts:
        assert lab.sh(alice, *argv).returncode != 0, argv
    assert lab.sh(ctl, str(lab.users.python), "-c", pin, str(pins), "verify").stdout.strip() == (
        "True"
    )

    pins.chmod(0o660)  # a hand chmod: now a member can rewrite it in place
    assert lab.sh(alice, "/bin/sh", "-c", f"printf '{theirs}' > {pins}").returncode == 0
    refused = lab.sh(ctl, str(lab.users.python), "-c", pin, str(pins), "verify")
    assert refused.returncode != 0
    assert "is writable by others than its owner" in refused.stderr
    doctor = lab.run(alice, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["state_files"]["status"] == "fail"
    assert f"{pins} is writable by others than its owner {ctl}" in checks["state_files"]["detail"]
    assert f"chmod go-w {pins}" in checks["state_files"]["hint"]


def test_saves_the_controller_cannot_read_keep_it_running(lab: Lab, emu: Emulator) -> None:
    """Before: a member's save with umask 077 (or a chmod 600) left desired.yaml unreadable
    and the controller exited 78, which its unit never restarts. Now an unreadable file is an
    invalid one: what was in force stays, the problem is in status and the events, the
    controller keeps running, and the next readable save is applied."""
    ctl, _, bob = lab.users.names
    mine = lab.members / f"{bob}.yaml"
    lab.write_as(bob, mine, _slots(["r1"], "held"))
    controller = subprocess.Popen(
        lab.command(
            ctl, str(lab.users.python), "-m", "reconciler", "-f", str(lab.desired),
            "--state-dir", str(lab.state), "run",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=lab.users.home / ctl,  # never this checkout: `-m` would import its code
    )  # fmt: skip
    try:
        snap = _wait(lab, lambda s: _names(s) == {"r1"})
        lab.write_as(bob, mine, _slots(["r1", "r2"], "held"), umask="077")  # 0600: his alone
        snap = _wait(lab, lambda s: any("permission denied" in e for e in _errors(s)))
        assert _names(snap) == {"r1"}  # his file as it was stays in force
        assert f"chmod g+r {mine}" in " ".join(_errors(snap))
        # root saves the shared file with umask 077 (sudo vim): root's, 0600
        text = lab.desired.read_text().replace("slots: []", _slots(["s1"], "held").strip())
        (lab.base / "desired.new").write_text(text)
        os.chmod(lab.base / "desired.new", 0o600)
        os.replace(lab.base / "desired.new", lab.desired)
        snap = _wait(lab, lambda s: any("cannot read: Permission denied" in e for e in _errors(s)))
        assert controller.poll() is None, controller.stderr
        assert _events(lab, "desired.invalid")

        lab.sh(bob, "chmod", "640", str(mine))  # readable again: applied
        os.chmod(lab.desired, 0o644)
        snap = _wait(lab, lambda s: _names(s) == {"s1", "r1", "r2"} and not _errors(s))
        assert {s["name"]: s.get("owner") for s in snap["slots"]} == {
            "s1": None, "r1": bob, "r2": bob,
        }  # fmt: skip
    finally:
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(timeout=30)
    assert code == EX_OK, controller.stderr.read() if controller.stderr else ""


def _status(lab: Lab) -> dict[str, Any] | None:
    try:
        return json.loads((lab.state / "controller" / "status.json").read_text())
    except (OSError, ValueError):
        return None


def _names(snap: dict[str, Any]) -> set[str]:
    return {s["name"] for s in snap.get("slots", [])}


def _errors(snap: dict[str, Any]) -> list[str]:
    return list(snap.get("desired", {}).get("errors", []))


def _wait(lab: Lab, done: Any, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    snap = None
    while time.monotonic() < deadline:
        snap = _status(lab)
        if snap is not None and done(snap):
            return snap
        time.sleep(0.1)
    raise AssertionError(f"the status never came: {snap}")


def test_a_member_cannot_chmod_the_intent_lock_and_a_bad_one_is_one_line(lab: Lab) -> None:
    """Before: whoever made intent.lock first could chmod 600 it, and every other member's edit
    died with a PermissionError traceback. Now the lock is the controller's user's (made by
    ``service install --shared``), a member's chmod fails, and a lock nobody can open is one
    line naming its owner and the fix."""
    ctl, alice, bob = lab.users.names
    lock = lab.state / "controller" / "intent.lock"
    assert pwd.getpwuid(lock.stat().st_uid).pw_name == ctl
    assert lab.sh(bob, "chmod", "600", str(lock)).returncode != 0
    add = ("add-slot", "--zone", ZONE, "--accelerator", "v4-8", "--name")
    assert lab.run(alice, *add, "l1").returncode == EX_OK

    lock.chmod(0o600)  # the controller's user's own mistake
    refused = lab.run(alice, *add, "l2")
    assert refused.returncode == EX_NOPERM
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert f"is {ctl}'s, mode 0600" in refused.stderr and f"chmod 640 {lock}" in refused.stderr
    lock.chmod(0o640)
    assert lab.run(alice, *add, "l2").returncode == EX_OK
    # nor can a member change a lab-wide setting (the shared file's owner's), or run the
    # lab's controller
    refused = lab.run(bob, "suspend")
    assert refused.returncode == EX_NOPERM and "lab-wide settings" in refused.stderr
    refused = lab.run(bob, "run")
    assert refused.returncode == EX_NOPERM and f"its controller runs as {ctl}" in refused.stderr


def test_a_hand_edit_of_anothers_slot_is_refused(lab: Lab, emu: Emulator) -> None:
    """Before: any member could write desired.yaml, so a hand edit by alice released bob's
    slot and the audit called it bob's (the file's owner at load). Now bob's slots are in his
    file, which only he can write; alice's own file naming his slot is an error at both
    places, and nothing of his changes."""
    ctl, alice, bob = lab.users.names
    emu.add_queued_resource(ZONE, "h1", state="ACTIVE", labels={"managed-by": "tpu-reconciler"})
    his = lab.members / f"{bob}.yaml"
    lab.write_as(bob, his, _slots(["h1"], "held"))
    assert lab.run(ctl, "apply", "--yes").returncode == EX_OK
    released = _slots(["h1"], "released")
    for target in (his, lab.desired):
        for how in (
            f"printf '%s' '{released}' > {target}",  # in place
            f"printf '%s' '{released}' > {target}.x && mv -f {target}.x {target}",
        ):
            assert lab.sh(alice, "/bin/sh", "-c", how).returncode != 0, (target, how)  # fmt: skip
    hers = lab.members / f"{alice}.yaml"
    lab.write_as(alice, hers, released)  # her own file, declaring his slot
    valid = lab.run(alice, "validate")
    assert valid.returncode == EX_REFUSED
    assert f"{hers}:2:12: 'h1' is declared in two files: here and at {his}:2:12" in valid.stderr
    assert f"{his}:2:12: 'h1' is declared in two files: here and at {hers}:2:12" in valid.stderr
    lab.write_as(alice, hers, released.replace("want", f"owner: {bob}, want"))  # in his name
    assert "what a member's file declares is its owner's" in lab.run(alice, "validate").stderr

    applied = lab.run(ctl, "apply", "--yes")
    assert applied.returncode == EX_OK, applied.stderr
    assert _qrs(emu, ["h1"]) == {"h1": "ACTIVE"}
    loads = [r for r in _audit(lab) if r["source"] == "file" and "h1" in r["added"] + r["changed"]]
    assert loads and {(r["file"], r["file_owner"]) for r in loads} == {(str(his), bob)}


def test_skill_install_never_follows_a_link_planted_in_its_directory(lab: Lab) -> None:
    """Before: ``skill install --target DIR`` followed a symbolic link another user put at
    ``DIR/tpu-reconciler``. Now it refuses it (exit 77), and a directory of someone else's."""
    _, alice, bob = lab.users.names
    shared = lab.base / "skills"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)  # like /tmp
    victim = lab.users.home / alice / "notes"
    assert lab.sh(alice, "mkdir", str(victim)).returncode == 0
    assert lab.sh(bob, "ln", "-s", str(victim), str(shared / "tpu-reconciler")).returncode == 0
    done = lab.run(alice, "skill", "install", "--target", str(shared))
    assert done.returncode == EX_NOPERM, done.stderr
    assert "not followed" in done.stderr
    assert list(victim.iterdir()) == []
    os.unlink(shared / "tpu-reconciler")
    assert lab.sh(bob, "mkdir", str(shared / "tpu-reconciler")).returncode == 0
    done = lab.run(alice, "skill", "install", "--target", str(shared))
    assert done.returncode == EX_NOPERM and "not by you" in done.stderr
    own = lab.users.home / alice / "skills"
    done = lab.run(alice, "skill", "install", "--target", str(own))
    assert done.returncode == EX_OK, done.stderr
    assert {p.name for p in (own / "tpu-reconciler").iterdir()} == {"SKILL.md", "PROTOCOL.md"}
