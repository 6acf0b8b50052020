"""doctor's checks for a shared lab's state files and layout and for ``quota_source: cloud``
(runtime/doctor_lab.py), judged from facts alone."""

from __future__ import annotations

import pytest

from reconciler.runtime import doctor_lab as dl

CTL = 1000  # the controller's user (the state directory's owner)


def owned(name: str, uid: int, owner: str, **kw: object) -> dl.OwnedFacts:
    return dl.OwnedFacts(name, f"/lab/{name}", uid, owner, **kw)  # type: ignore[arg-type]


def judge(*facts: dl.OwnedFacts) -> tuple[str, str, str]:
    c = dl.check_state_files(facts, controller_uid=CTL, controller="tpuctl")
    return c.status, c.detail, c.hint


def test_the_controllers_and_roots_files_are_fine() -> None:
    status, detail, _ = judge(
        owned("known_hosts", CTL, "tpuctl"),
        owned("memory.json", 0, "root"),
        owned("confirm.json", CTL, "tpuctl", recorded_user="tpuctl"),
    )
    assert status == "ok"
    assert detail == "known_hosts, memory.json, confirm.json (by tpuctl): the controller's own"
    assert judge() == ("ok", "none written yet", "")


def test_a_member_cannot_own_even_a_confirmation_among_the_controllers_files() -> None:
    """Members confirm through the inbox; a confirm.json of theirs in controller/ is foreign."""
    status, detail, _ = judge(owned("confirm.json", 1001, "alice", recorded_user="alice"))
    assert status == "fail" and "is owned by alice, not by the controller's user" in detail


def test_a_file_others_may_write_or_with_two_names_fails_with_the_fix() -> None:
    status, detail, hint = judge(owned("known_hosts", CTL, "tpuctl", mode=0o100660))
    assert status == "fail"
    assert detail.startswith("/lab/known_hosts is writable by others than its owner tpuctl")
    assert hint.startswith("chmod go-w /lab/known_hosts")
    status, detail, hint = judge(owned("memory.json", CTL, "tpuctl", nlink=2))
    assert (status, hint) == ("fail", "rm /lab/memory.json")
    assert "has 2 names (a hard link)" in detail


@pytest.mark.parametrize("name", ["known_hosts", "memory.json"])
def test_a_members_known_hosts_or_memory_fails_with_the_fix(name: str) -> None:
    status, detail, hint = judge(owned(name, 1001, "alice"))
    assert status == "fail"
    assert detail.startswith(f"/lab/{name} is owned by alice, not by the controller's user tpuctl")
    assert hint == f"rm /lab/{name}  (or, if you trust its content: sudo chown tpuctl /lab/{name})"


def test_a_symbolic_link_fails_whoever_made_it() -> None:
    status, detail, hint = judge(owned("known_hosts", CTL, "tpuctl", link=True))
    assert (status, hint) == ("fail", "rm /lab/known_hosts")
    assert "symbolic link (made by tpuctl)" in detail


def test_a_confirmation_naming_someone_else_warns_and_a_fail_comes_first() -> None:
    forged = owned("confirm.json", CTL, "tpuctl", recorded_user="bob")
    status, detail, hint = judge(forged)
    assert status == "warn" and "names 'bob' but is owned by tpuctl: it confirms nothing" in detail
    assert hint.startswith("rm /lab/confirm.json")
    status, detail, _ = judge(forged, owned("memory.json", 1002, "carol"))
    assert status == "fail" and "carol" in detail and "bob" not in detail


@pytest.mark.parametrize(
    ("facts", "blocked", "status", "detail"),
    [
        (None, "no credentials (see auth)", "skip", "not tried: no credentials (see auth)"),
        (
            dl.QuotasFacts("http://q/", limits=3),
            None,
            "ok",
            "3 Cloud TPU chip limits from the Cloud Quotas API at http://q/",
        ),
        (
            dl.QuotasFacts("http://q/", limits=0),
            None,
            "warn",
            "the Cloud Quotas API at http://q/ answered with no Cloud TPU chip limit: only the "
            "file's quotas: hold creates back",
        ),
        (
            dl.QuotasFacts("http://q/", error="PERMISSION_DENIED"),
            None,
            "fail",
            "the Cloud Quotas API at http://q/ failed: PERMISSION_DENIED",
        ),
    ],
)
def test_cloud_quotas(
    facts: dl.QuotasFacts | None, blocked: str | None, status: str, detail: str
) -> None:
    c = dl.check_cloud_quotas(facts, blocked)
    assert (c.name, c.status, c.detail) == ("cloud_quotas", status, detail)
    assert ("cloudquotas.googleapis.com" in c.hint) == (status in ("fail", "warn"))


def entry(
    name: str, path: str, uid: int = CTL, mode: int = 0o100640, **kw: object
) -> dl.OwnedFacts:
    return dl.OwnedFacts(name, path, uid, {CTL: "tpuctl", 0: "root"}.get(uid, f"u{uid}"),
                         mode=mode, **kw)  # type: ignore[arg-type]  # fmt: skip


def lab(**changes: object) -> dl.LabFacts:
    """A lab as ``service install --shared`` leaves it, with ``changes``."""
    good: dict[str, object] = {
        "controller_uid": CTL,
        "controller": "tpuctl",
        "root": entry("state directory", "/s", mode=0o43770),
        "private": entry("controller/", "/s/controller", mode=0o42750),
        "inbox": entry("inbox/", "/s/inbox", mode=0o43730),
        "intent_lock": entry("intent.lock", "/s/controller/intent.lock"),
        "desired": entry("desired.yaml", "/d/desired.yaml", mode=0o100644),
        "shared_owners": {CTL, 0},
        "members_dir": entry("desired.d", "/d/desired.d", mode=0o43770),
        "members": (entry("alice.yaml", "/d/desired.d/alice.yaml", 1001),),
    }
    good.update(changes)
    return dl.LabFacts(**good)  # type: ignore[arg-type]


def test_a_lab_as_set_up_is_ok() -> None:
    c = dl.check_lab(lab(members=(entry("u1001.yaml", "/d/desired.d/u1001.yaml", 1001),)))
    assert (c.status, c.detail) == (
        "ok",
        "/s: setgid and sticky, controller/ its user's alone, inbox/ sticky; 1 member file",
    )


@pytest.mark.parametrize(
    ("changes", "said", "fix"),
    [
        ({"root": entry("state directory", "/s", mode=0o42770)}, "/s is mode 2770, not 3770",
         "chmod 3770 /s"),
        ({"private": entry("controller/", "/s/controller", mode=0o42770)},
         "/s/controller is mode 2770, not 2750", "chmod 2750 /s/controller"),
        ({"private": entry("controller/", "/s/controller", 1001, mode=0o42750)},
         "/s/controller is u1001's, not the controller's user tpuctl's", "rm -r /s/controller"),
        ({"inbox": None}, "the lab's inbox/ is missing", "service install --shared GROUP"),
        ({"intent_lock": entry("intent.lock", "/s/controller/intent.lock", 1001)},
         "not the controller's user's read-only lock", "rm /s/controller/intent.lock"),
        ({"intent_lock": entry("intent.lock", "/s/controller/intent.lock", mode=0o100600)},
         "members cannot open /s/controller/intent.lock", "chmod 640 /s/controller/intent.lock"),
        ({"private": None}, "has the lab's older layout", "restart the lab's controller"),
        ({"desired": entry("desired.yaml", "/d/desired.yaml", 1002, mode=0o100644)},
         "/d/desired.yaml is u1002's, who may not own the lab's shared file",
         "cp /d/desired.yaml /d/desired.yaml.new"),
        ({"desired": entry("desired.yaml", "/d/desired.yaml", mode=0o100664)},
         "/d/desired.yaml may be written by others than tpuctl", "chmod go-w /d/desired.yaml"),
        ({"members_dir": entry("desired.d", "/d/desired.d", mode=0o42770)},
         "/d/desired.d is not a sticky directory", "chmod 3770 /d/desired.d"),
        ({"members": (entry("bob.yaml", "/d/desired.d/bob.yaml", 1001),)},
         "a member's file is named after its owner (u1001.yaml)",
         "mv /d/desired.d/bob.yaml /d/desired.d/u1001.yaml (as u1001)"),
        ({"members": (entry("u1001.yaml", "/d/desired.d/u1001.yaml", 1001, mode=0o100600),)},
         "cannot be read by the controller", "chmod g+r /d/desired.d/u1001.yaml (as u1001)"),
        ({"members": (entry("u1001.yaml", "/d/desired.d/u1001.yaml", 1001, mode=0o100664),)},
         "writable by others than its owner u1001", "chmod go-w /d/desired.d/u1001.yaml"),
    ],
)  # fmt: skip
def test_each_wrong_mode_or_owner_of_a_lab_is_named_with_its_fix(
    changes: dict[str, object], said: str, fix: str
) -> None:
    c = dl.check_lab(lab(**changes))
    assert c.status == "fail", c
    assert said in c.detail
    assert fix in c.hint


def test_leftovers_and_a_missing_members_dir_warn() -> None:
    c = dl.check_lab(lab(leftovers=(entry("confirm.json", "/s/confirm.json", 1001),),
                         members_dir=None, members=()))  # fmt: skip
    assert c.status == "warn"
    assert "/s/confirm.json is left from the lab's older layout (by u1001)" in c.detail
    assert "no members' directory" in c.detail
    assert "rm /s/confirm.json" in c.hint
