"""``setup.at_boot`` on Compute Engine: reading each host's report and changing the startup
script of a live slot's hosts (``adapters/compute.ComputeCloud`` delegates here).

A single-host slice is the instance named like its node; a MIG slice's hosts are
``<node>-<i>`` in worker order (``compute_body.Layout.members``).

- ``boot_reports``: each host's ``tpu-reconciler/`` guest attributes
  (``instances.getGuestAttributes``), worker index = the host's place. A host with none yet
  answers 404: no rows.
- ``set_boot_script``: each host's metadata read (``instances.get``: items and fingerprint),
  the ``startup-script`` and ``enable-guest-attributes`` set in it, written back with the
  fingerprint (``instances.setMetadata``), so keys others set stay; the operation is not
  waited for (the next look reads the new generation). A MIG's instance template is immutable
  and stays: a host the MIG re-creates boots the template's setup, which the controller reads
  as another generation and runs over SSH. A host that is gone has nothing to update.

May: send HTTP requests through the cloud's session. May not: decide anything.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from reconciler.adapters import compute_parse as cp
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import Operation
from reconciler.adapters.google_http import GoogleSession
from reconciler.model.boot_script import QUERY, boot_metadata
from reconciler.model.names import check_name, check_zone
from reconciler.model.observed import host_names


def hosts_of(node: str, workers: int) -> list[str]:
    """The instances of a node with ``workers`` hosts, worker order, names checked."""
    return [check_name(h) for h in host_names(check_name(node), workers)]


async def boot_reports(
    http: GoogleSession, base: str, zone: str, node: str, workers: int
) -> list[dict[str, Any]]:
    where = f"{base}zones/{check_zone(zone)}/instances/"

    async def one(host: str) -> dict[str, Any] | Outcome:
        url = f"{where}{host}/getGuestAttributes"
        return await http.call(Operation.GET, "GET", url, params={"queryPath": QUERY})

    answers = await asyncio.gather(*(one(h) for h in hosts_of(node, workers)))
    try:
        return [
            row
            for worker, answer in enumerate(answers)
            if not isinstance(answer, Outcome)
            for row in cp.guest_rows(answer, worker)
        ]
    except ValueError as exc:
        raise http.malformed("getGuestAttributes", str(exc)) from None


async def set_boot_script(
    http: GoogleSession, base: str, zone: str, node: str, workers: int, script: str
) -> None:
    where = f"{base}zones/{check_zone(zone)}/instances/"

    async def one(host: str) -> None:
        answer = await http.call(Operation.GET, "GET", f"{where}{host}")
        if isinstance(answer, Outcome):
            return  # gone
        meta = answer.get("metadata") or {}
        items = meta.get("items") or [] if isinstance(meta, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise http.malformed("get", "instance metadata items are not a list of objects")
        ours = boot_metadata(script)
        kept = [i for i in items if i.get("key") not in ours]
        body = {
            "fingerprint": meta.get("fingerprint"),
            "items": kept + [{"key": k, "value": v} for k, v in ours.items()],
        }
        await http.call(
            Operation.OTHER,
            "POST",
            f"{where}{host}/setMetadata",
            params={"requestId": str(uuid.uuid4())},
            body=body,
        )

    await asyncio.gather(*(one(h) for h in hosts_of(node, workers)))
