"""``<state dir>/confirm.json``: the user's confirmation of deletes held by the delete guard.

An input to the controller, never a cloud action: ``tpu-reconciler confirm`` (or the MCP tool
``confirm_deletes``) writes the exact set of guarded deletes it read from the status snapshot,
with that set's fingerprint; the controller reads it every pass and lets exactly those deletes
through (``core.control.confirmed_deletes``). Written atomically, 0600. A missing, unreadable or
tampered file confirms nothing, and so does one made under another intent (the desired file's
digest changed since) or older than ``core.control.CONFIRM_TTL``; the controller removes a
confirmation once it is spent that way or once every delete it names is done
(``clear_spent``), so an old confirmation never lets a later mass delete through.

Who confirmed: the file's owner (a member cannot make a file that another user owns), recorded
in the document as ``user`` too. ``read_confirmation_checked`` applies ``model/trust``'s rule:
a document naming another user than its owner, or a member's confirmation of deletes of slots
the lab's policy does not let them change, confirms nothing (and says why).

In a lab's layout (``adapters/lab_layout``) the file the controller acts on is in its own
directory, where no member can create, rename, link or write (``StateDir.confirm``). A member's
``confirm`` leaves a request in the lab's sticky ``inbox/`` instead (``write_request``): a file
that is theirs because the kernel says so. The controller takes each request
(``take_requests``): it checks the file (``model/trust.request_problem``: one name, writable by
its owner alone, a member's) and the member's right to confirm every delete it names, removes
it, and writes an accepted one into its own directory naming the requester
(``accepted_document``). The controller's user and root write there directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.files import read_json, write_json
from reconciler.adapters.lab import read_policy, user_name
from reconciler.adapters.lab_layout import may_run
from reconciler.adapters.owned_files import link_problem, open_unfollowed, read_owned
from reconciler.adapters.statedir import StateDir
from reconciler.core.control import confirmation, confirmation_spent, confirmed_deletes
from reconciler.errors import NotPermitted
from reconciler.model.policy import Policy
from reconciler.model.trust import confirm_refusal, request_problem

#: How many requests one pass takes from the inbox at most (the rest wait for the next).
REQUESTS_PER_PASS: Final = 64
_REQUEST: Final = re.compile(r"^confirm-[A-Za-z0-9_.-]{1,80}\.json$")
_REQUEST_LIMIT: Final = 64 * 1024
_STALE_TEMP: Final = 600.0  # seconds a member's unfinished request may lie in the inbox


def confirm_path(state: StateDir) -> Path:
    return state.confirm


def read_confirmation(state: StateDir) -> Any:
    """The confirmation document, or None when there is none. A file that cannot be read or
    parsed reads as ``{}``: it confirms nothing, and is spent (so the controller removes it)."""
    try:
        return read_json(confirm_path(state))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def read_confirmation_checked(
    state: StateDir, *, owners: Mapping[str, str | None]
) -> tuple[Any, str | None]:
    """The confirmation document (None when there is none) and why it does not count, if so:
    then the document is ``{}`` (it confirms nothing and is spent). ``owners``: the owner of
    each slot the caller knows (``model/trust.confirm_refusal``)."""
    try:
        owned = read_owned(confirm_path(state))
    except FileNotFoundError:
        return None, None
    except OSError:
        return {}, None
    try:
        document = json.loads(owned.content)
    except ValueError:
        return {}, None
    named = document.get("deletes") if isinstance(document, Mapping) else None
    recorded = document.get("user") if isinstance(document, Mapping) else None
    deletes = [d for d in named if isinstance(d, str)] if isinstance(named, list) else []
    reason = confirm_refusal(
        read_policy(state),
        file_user=owned.user,
        trusted=owned.by_controller,
        recorded_user=recorded,
        deletes=deletes,
        owners=owners,
    )
    return ({}, reason) if reason is not None else (document, None)


def read_confirmed(
    state: StateDir,
    *,
    digest: str | None,
    now: float,
    owners: Mapping[str, str | None] | None = None,
) -> frozenset[str]:
    """The deletes confirmed for the intent ``digest`` at ``now`` (empty when none), by a user
    who may confirm them (``owners`` as for ``read_confirmation_checked``)."""
    document, _ = read_confirmation_checked(state, owners=owners or {})
    return confirmed_deletes(document, digest=digest, now=now)


def write_confirmation(
    state: StateDir, deletes: list[str], *, digest: str | None, now: float
) -> str:
    """Confirm exactly ``deletes`` under the intent ``digest``; returns their fingerprint. A
    lab member's confirmation is a request in the inbox (the controller judges it)."""
    document = {**confirmation(deletes, digest=digest, now=now), "user": user_name(os.geteuid())}
    state.ensure()
    if state.lab and not may_run(state):
        write_request(state, document)
    else:
        write_json(confirm_path(state), document)
    return str(document["fingerprint"])


def write_request(state: StateDir, document: Mapping[str, Any]) -> Path:
    """``document`` as this user's request in the lab's inbox (0640, theirs), written under a
    dot name and renamed into place, so the controller never reads half of one. The inbox
    cannot be listed by members: it is reached through an ``O_PATH`` descriptor."""
    name = f"confirm-{user_name(os.geteuid())}-{secrets.token_hex(6)}.json"
    data = json.dumps(document, indent=2).encode() + b"\n"
    try:
        folder = os.open(state.inbox, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise NotPermitted(
            f"cannot reach the lab's inbox {state.inbox}: {e.strerror or e} (the controller's "
            "user makes it with `tpu-reconciler service install --shared GROUP`)"
        ) from None
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(f".{name}", flags, 0o640, dir_fd=folder)
        try:
            os.fchmod(fd, 0o640)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(f".{name}", name, src_dir_fd=folder, dst_dir_fd=folder)
    except PermissionError as e:
        raise NotPermitted(
            f"cannot leave a request in the lab's inbox {state.inbox}: {e.strerror} (is this "
            "user in the lab's group?)"
        ) from None
    finally:
        os.close(folder)
    return state.inbox / name


@dataclass(frozen=True, slots=True)
class Request:
    """A member's request taken from the inbox: the document when it counts, else why not."""

    path: Path
    user: str  # its owner, as the kernel says
    uid: int
    document: Mapping[str, Any] | None
    reason: str | None = None

    @property
    def deletes(self) -> list[str]:
        named = self.document.get("deletes") if self.document is not None else None
        return [d for d in named if isinstance(d, str)] if isinstance(named, list) else []


def take_requests(state: StateDir, *, owners: Mapping[str, str | None]) -> list[Request]:
    """Each request in the lab's inbox, oldest first, judged and removed (``owners``: the
    owner of each slot the controller knows, as for ``read_confirmation_checked``)."""
    try:
        entries = list(os.scandir(state.inbox))
    except OSError:
        return []
    now = time.time()
    ready = []
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if entry.name.startswith("."):
            if now - st.st_mtime > _STALE_TEMP:  # a request its writer never finished
                _remove(Path(entry.path))
            continue
        ready.append((st.st_mtime_ns, entry.name))
    policy = read_policy(state)
    controller_uid = state.private.stat().st_uid
    taken = []
    for _, name in sorted(ready)[:REQUESTS_PER_PASS]:
        path = state.inbox / name
        taken.append(_judge(path, owners, policy, controller_uid))
        _remove(path)
    return taken


def _judge(
    path: Path, owners: Mapping[str, str | None], policy: Policy, controller_uid: int
) -> Request:
    try:
        opened = open_unfollowed(path, limit=_REQUEST_LIMIT)
    except OSError as e:
        return Request(path, "?", -1, None, f"{path}: cannot read it: {e.strerror or e}")
    if opened is None:
        owner = path.lstat().st_uid
        return Request(path, user_name(owner), owner, None, link_problem(path))
    st, user = opened.st, opened.user
    reason = request_problem(
        str(path), regular=opened.regular, nlink=st.st_nlink, mode=st.st_mode, uid=st.st_uid,
        owner=user, controller_uid=controller_uid,
    )  # fmt: skip
    if reason is None and not _REQUEST.match(path.name):
        reason = f"{path} is not named as a confirmation request (confirm-*.json)"
    try:
        document = json.loads(opened.content) if reason is None else None
    except ValueError as e:
        reason = f"{path} is not JSON: {e}"
        document = None
    if reason is None and not isinstance(document, Mapping):
        reason = f"{path} is not a confirmation document"
    if reason is not None or not isinstance(document, Mapping):
        return Request(path, user, st.st_uid, None, reason)
    request = Request(path, user, st.st_uid, document)
    refused = confirm_refusal(
        policy,
        file_user=user,
        trusted=False,
        recorded_user=document.get("user"),
        deletes=request.deletes,
        owners=owners,
    )
    return request if refused is None else Request(path, user, st.st_uid, None, refused)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except IsADirectoryError:
        with contextlib.suppress(OSError):
            path.rmdir()
    except OSError:
        pass


def accepted_document(request: Request) -> dict[str, Any]:
    """What the controller writes into its own directory for a request it accepted: the
    member's confirmation, now the controller's file, naming who asked."""
    assert request.document is not None
    return {
        **request.document,
        "user": user_name(os.geteuid()),
        "requested_by": request.user,
        "requested_uid": request.uid,
    }


def accept(state: StateDir, request: Request) -> None:
    write_json(confirm_path(state), accepted_document(request))


def remove_confirmation(state: StateDir) -> bool:
    """Delete ``confirm.json``; True when there was one."""
    try:
        confirm_path(state).unlink()
    except FileNotFoundError:
        return False
    return True


def clear_spent(
    state: StateDir, *, digest: str | None, now: float, present: Collection[str]
) -> bool:
    """Remove ``confirm.json`` when it confirms nothing any more or all its deletes are done;
    True when a file was removed."""
    document = read_confirmation(state)
    if document is None or not confirmation_spent(
        document, digest=digest, now=now, present=present
    ):
        return False
    return remove_confirmation(state)
