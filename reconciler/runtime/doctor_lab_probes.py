"""The I/O side of ``runtime/doctor_lab``: the owners of a shared lab's owner-checked state
files, and one read of the Cloud Quotas API.

May: lstat files and read confirm.json (never following a link), read the password database,
make one read-only Cloud Quotas call. May not: write anything, print.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import stat
from collections.abc import Mapping
from pathlib import Path

from reconciler.adapters.files import is_shared_dir
from reconciler.adapters.lab import user_name
from reconciler.adapters.owned_files import read_owned
from reconciler.errors import ReconcilerError
from reconciler.model.desired import Desired
from reconciler.runtime import doctor_lab as dl


def probe_state_files(root: Path) -> tuple[list[dl.OwnedFacts], int] | None:
    """The owner-checked files found in a shared lab's state directory and the directory's
    owner (the controller's user); None when ``root`` is not a shared lab's."""
    if not is_shared_dir(root):
        return None
    try:
        controller_uid = root.stat().st_uid
    except OSError:
        return None
    found: list[dl.OwnedFacts] = []
    for name in (*dl.OWN_FILES, dl.CONFIRM):
        path = root / name
        try:
            st = path.lstat()
        except OSError:
            continue  # not written yet (or not ours to see): nothing to judge
        link = stat.S_ISLNK(st.st_mode)
        recorded: object = None
        if name == dl.CONFIRM and not link:
            with contextlib.suppress(OSError, ValueError):
                document = json.loads(read_owned(path).content)
                recorded = document.get("user") if isinstance(document, dict) else None
        found.append(
            dl.OwnedFacts(name, str(path), st.st_uid, user_name(st.st_uid), link, recorded)
        )
    return found, controller_uid


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
