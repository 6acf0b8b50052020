"""The owner rules for a lab's state files (model/trust): pure tables."""

from __future__ import annotations

import pytest

from reconciler.model.policy import Policy
from reconciler.model.trust import (
    confirm_refusal,
    foreign_file,
    member_file_problem,
    request_problem,
    slot_of_delete,
    trusted_uids,
    written_file_problem,
)

TRUSTED = trusted_uids(reader=1001, directory_owner=1000)


def test_trusted_owners_are_the_controller_root_and_the_reader() -> None:
    assert frozenset({0, 1000, 1001}) == TRUSTED
    assert trusted_uids(reader=1000, directory_owner=1000) == frozenset({0, 1000})


@pytest.mark.parametrize(("uid", "used"), [(1000, True), (0, True), (1001, True), (1002, False)])
def test_a_file_is_used_only_from_a_trusted_owner(uid: int, used: bool) -> None:
    problem = foreign_file(
        "/lab/known_hosts", uid=uid, owner="bob", trusted=TRUSTED, controller="ctl"
    )
    assert (problem is None) == used
    if not used:
        assert problem is not None and "\n" not in problem
        assert problem.startswith("/lab/known_hosts is owned by bob, not by the controller's")


@pytest.mark.parametrize(
    ("delete", "slot"),
    [("us-central2-b/alpha@123", "alpha"), ("z/a-b@-", "a-b"), ("z/n@c@x", "n@c"), ("x", "x")],
)
def test_slot_of_a_delete_id(delete: str, slot: str) -> None:
    assert slot_of_delete(delete) == slot


LAB = Policy(admins=frozenset({"carol"}))
OWNERS = {"a1": "alice", "a2": "alice", "b1": "bob", "free": None}


def _refusal(
    user: str,
    deletes: list[str],
    *,
    policy: Policy = LAB,
    trusted: bool = False,
    recorded: object = None,
) -> str | None:
    return confirm_refusal(
        policy,
        file_user=user,
        trusted=trusted,
        recorded_user=recorded,
        deletes=deletes,
        owners=OWNERS,
    )


@pytest.mark.parametrize(
    ("user", "slots", "counts"),
    [
        ("alice", ["a1", "a2"], True),  # her own
        ("alice", ["a1", "free"], True),  # an unowned slot is anyone's, as for an edit
        ("alice", ["a1", "b1"], False),  # one of bob's: the whole confirmation is void
        ("bob", ["a1"], False),
        ("carol", ["a1", "b1"], True),  # an admin
        ("alice", ["gone"], False),  # left the intent, owner unknown: admins only
        ("carol", ["gone"], True),
    ],
)
def test_a_member_confirms_only_what_the_policy_lets_them_change(
    user: str, slots: list[str], counts: bool
) -> None:
    reason = _refusal(user, [f"z/{s}@1" for s in slots])
    assert (reason is None) == counts
    if not counts:
        assert reason is not None and reason.startswith(f"the confirmation by {user} is ignored")


def test_the_controllers_user_and_a_private_directory_confirm_anything() -> None:
    assert _refusal("ctl", ["z/b1@1", "z/gone@2"], trusted=True) is None
    assert _refusal("bob", ["z/a1@1", "z/gone@2"], policy=Policy.private()) is None


def test_edit_others_lets_every_member_confirm_and_a_broken_policy_nobody() -> None:
    assert _refusal("bob", ["z/a1@1", "z/gone@2"], policy=Policy(edit_others=True)) is None
    broken = Policy.broken("policy.yaml is missing")
    assert _refusal("alice", ["z/a1@1"], policy=broken) is None  # her own still
    assert _refusal("alice", ["z/b1@1"], policy=broken) is not None
    assert _refusal("alice", ["z/gone@1"], policy=broken) is not None


def test_a_document_naming_another_user_than_its_owner_counts_for_nothing() -> None:
    reason = _refusal("bob", ["z/b1@1"], recorded="alice")
    assert reason is not None and "names 'alice' but is owned by bob" in reason
    assert _refusal("ctl", [], trusted=True, recorded="alice") is not None
    assert _refusal("bob", ["z/b1@1"], recorded="bob") is None


REG = 0o100000  # S_IFREG


@pytest.mark.parametrize(
    ("regular", "nlink", "mode", "uid", "said"),
    [
        (True, 1, 0o640, 1000, None),
        (True, 1, 0o600, 0, None),
        (False, 1, 0o640, 1000, "is not a regular file"),
        (True, 2, 0o640, 1000, "has 2 names (a hard link)"),
        (True, 1, 0o660, 1000, "is writable by others than its owner ctl (mode 0660)"),
        (True, 1, 0o642, 1000, "is writable by others than its owner ctl (mode 0642)"),
        (True, 1, 0o640, 1002, "is owned by ctl, not by the controller's user ctl"),
    ],
)
def test_a_file_the_controller_wrote_is_used_only_as_it_wrote_it(
    regular: bool, nlink: int, mode: int, uid: int, said: str | None
) -> None:
    problem = written_file_problem(
        "/lab/controller/known_hosts", regular=regular, nlink=nlink, mode=REG | mode, uid=uid,
        owner="ctl", trusted=TRUSTED, controller="ctl",
    )  # fmt: skip
    assert (problem is None) == (said is None)
    if said is not None:
        assert problem is not None and said in problem and "\n" not in problem


@pytest.mark.parametrize(
    ("nlink", "mode", "uid", "said"),
    [
        (1, 0o640, 1002, None),  # a member's own request
        (2, 0o640, 1002, "has 2 names"),  # a link to some other file
        (1, 0o660, 1002, "writable by others than its owner"),  # another member could edit it
        (1, 0o640, 1000, "confirms in the controller's own directory"),  # the controller's file
        (1, 0o640, 0, "confirms in the controller's own directory"),
    ],
)
def test_a_request_in_the_inbox_is_a_members_own_file(
    nlink: int, mode: int, uid: int, said: str | None
) -> None:
    problem = request_problem(
        "/lab/inbox/confirm-x.json", regular=True, nlink=nlink, mode=REG | mode, uid=uid,
        owner="bob", controller_uid=1000,
    )  # fmt: skip
    assert (problem is None) == (said is None)
    assert said is None or (problem is not None and said in problem)


@pytest.mark.parametrize(
    ("named", "owner", "mode", "nlink", "said"),
    [
        ("alice", "alice", 0o640, 1, None),
        ("bob", "alice", 0o640, 1, "a member's file is named after its owner (alice.yaml)"),
        ("alice", "alice", 0o664, 1, "writable by others than its owner alice"),
        ("alice", "alice", 0o640, 2, "has 2 names"),
    ],
)
def test_a_members_file_is_named_after_its_owner_and_theirs_alone(
    named: str, owner: str, mode: int, nlink: int, said: str | None
) -> None:
    problem = member_file_problem(
        f"/d/desired.d/{named}.yaml", named=named, regular=True, nlink=nlink, mode=REG | mode,
        owner=owner,
    )  # fmt: skip
    assert (problem is None) == (said is None)
    assert said is None or (problem is not None and said in problem)
