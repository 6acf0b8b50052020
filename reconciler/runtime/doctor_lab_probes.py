"""The I/O side of ``runtime/doctor_lab``: a shared lab's state directory, its controller's
files and its intent files as they are, and one read of the Cloud Quotas API.

May: lstat files and list directories (never following a link), read confirm.json (never
following a link), read the policy and the password database, make one read-only Cloud Quotas
call. May not: write anything, print.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from reconciler.adapters.files import is_shared_dir
from reconciler.adapters.lab import user_name
from reconciler.adapters.lab_layout import STALE, is_controllers, shared_file_owners
from reconciler.adapters.member_files import members_dir
from reconciler.adapters.owned_files import read_owned
from reconciler.adapters.statedir import StateDir
from reconciler.errors import ReconcilerError
from reconciler.model.desired import Desired
from reconciler.runtime import doctor_lab as dl


def _facts(path: Path, name: str | None = None) -> dl.OwnedFacts | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    recorded: object = None
    if path.name == dl.CONFIRM:
        with contextlib.suppress(OSError, ValueError):
            document = json.loads(read_owned(path).content)
            recorded = document.get("user") if isinstance(document, dict) else None
    return dl.OwnedFacts(
        name or path.name, str(path), st.st_uid, user_name(st.st_uid),
        link=os.path.islink(path), recorded_user=recorded, mode=st.st_mode, nlink=st.st_nlink,
    )  # fmt: skip


def _listed(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _member_name(name: str) -> bool:
    return name.endswith(".yaml") and not name.startswith(".")


def probe_lab(root: Path, desired: Path) -> tuple[list[dl.OwnedFacts], int, dl.LabFacts] | None:
    """The controller's files found, its user's uid and the lab's layout; None when ``root``
    is not a shared lab's state directory."""
    if not is_shared_dir(root):
        return None
    here = _facts(root, "state directory")
    if here is None:
        return None
    state = StateDir(root)
    private = _facts(state.private, "controller/") if state.lab else None
    own = [
        f for f in (_facts(p) for p in _listed(state.private) if p.is_file() or p.is_symlink())
        if f is not None and f.name != "intent.lock" and state.lab
    ]  # fmt: skip
    if not state.lab:  # the older layout: the controller's files judged where they are
        own = [f for f in (_facts(root / n) for n in ("known_hosts", "memory.json")) if f]
    leftovers = tuple(
        f for f in (_facts(p) for p in _listed(root))
        if f is not None and state.lab and (is_controllers(f.name) or f.name in STALE)
    )  # fmt: skip
    members = members_dir(desired)
    member_files = tuple(
        f for f in (_facts(p) for p in _listed(members) if _member_name(p.name)) if f is not None
    )
    lab = dl.LabFacts(
        controller_uid=here.uid,
        controller=here.owner,
        root=here,
        private=private,
        inbox=_facts(state.inbox, "inbox/"),
        intent_lock=_facts(state.intent_lock) if state.lab else None,
        leftovers=leftovers,
        desired=_facts(desired),
        shared_owners=shared_file_owners(state) or (),
        members_dir=_facts(members),
        members=member_files,
    )
    return own, here.uid, lab


async def probe_cloud_quotas(
    desired: Desired, env: Mapping[str, str], timeout: float
) -> dl.QuotasFacts:
    """One read of the chip limits, as the controller makes it (``runtime/quota_limits``)."""
    from reconciler.adapters.cloud_quotas import DEFAULT_ENDPOINT, ENDPOINT_ENV, read_limits

    endpoint = env.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT
    s = desired.settings
    try:
        limits = await asyncio.wait_for(
            read_limits(
                desired.project, env=env, quota_project=s.quota_project,
                adc=s.credentials == "adc", timeout=timeout,
            ),
            timeout,
        )  # fmt: skip
    except TimeoutError:
        return dl.QuotasFacts(endpoint, error=f"no answer within {timeout:g}s")
    except ReconcilerError as e:
        return dl.QuotasFacts(endpoint, error=str(e))
    except Exception as e:  # doctor reports, never crashes
        return dl.QuotasFacts(endpoint, error=f"{type(e).__name__}: {e}")
    return dl.QuotasFacts(endpoint, limits=len(limits))
