"""doctor's checks for a shared lab's state files and for ``quota_source: cloud``
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


def test_the_controllers_and_roots_files_and_a_members_own_confirmation_are_fine() -> None:
    status, detail, _ = judge(
        owned("known_hosts", CTL, "tpuctl"),
        owned("memory.json", 0, "root"),
        owned("confirm.json", 1001, "alice", recorded_user="alice"),
    )
    assert status == "ok"
    assert detail == "known_hosts, memory.json, confirm.json (by alice): the controller's own"
    assert judge() == ("ok", "none written yet", "")


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
    forged = owned("confirm.json", 1001, "alice", recorded_user="bob")
    status, detail, hint = judge(forged)
    assert status == "warn" and "names 'bob' but is owned by alice: it confirms nothing" in detail
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
