"""``setup.at_boot``'s reports on the Cloud TPU API, for both its clouds (``adapters/rest.py``
and ``adapters/gcloud.py``): a node's ``tpu-reconciler/`` guest attributes, read through the
cloud's own ``guest_attributes`` (one call per node, whatever its workers; Compute Engine's
per-host reports are ``adapters/compute_boot.py``).

May: call the cloud it is mixed into. May not: send anything itself, decide anything.
"""

from __future__ import annotations

from typing import Any, Protocol

from reconciler.adapters.tpu_api_parse import check_api
from reconciler.model.boot_script import QUERY


class _GuestAttributes(Protocol):
    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]: ...


class GuestAttributeBootReports:
    """The ``BootReports`` port of a TPU API cloud, from its ``guest_attributes``."""

    async def boot_reports(
        self: _GuestAttributes, api: str, zone: str, node: str, workers: int
    ) -> list[dict[str, Any]]:
        """``setup.at_boot``'s reports: the node's ``tpu-reconciler/`` guest attributes."""
        check_api(api)
        return await self.guest_attributes(zone, node, QUERY)


__all__ = ["GuestAttributeBootReports"]
