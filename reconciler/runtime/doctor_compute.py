"""``doctor``'s ``compute_api`` check: when the file holds a slot through Compute Engine, does
the Compute Engine API answer the controller's own look (its two aggregated lists)?

Pure like ``runtime.doctor``: ``doctor_probes.probe_compute`` looked. May: compute. May not:
do I/O, print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.runtime.doctor import Check, ok, skip

_HINT = (
    "check the project id, that the Compute Engine API is enabled (gcloud services enable "
    "compute.googleapis.com) and that your account may list instances and instance groups "
    "there (roles/compute.instanceAdmin.v1)"
)


@dataclass(frozen=True, slots=True)
class ComputeFacts:
    requests: int = 0  # capacity requests of ours seen (instances, MIG slices)
    unreachable: Sequence[str] = ()
    error: str | None = None


def check_compute_api(facts: ComputeFacts | None, blocked_by: str | None) -> Check:
    if facts is None:
        return skip("compute_api", f"not tried: {blocked_by or 'nothing to ask'}")
    if facts.error:
        return Check(
            "compute_api", "fail", f"listing TPU VMs on Compute Engine failed: {facts.error}", _HINT
        )
    if facts.unreachable:
        return Check(
            "compute_api",
            "warn",
            f"unreachable zones {', '.join(facts.unreachable)}",
            "usually a passing outage; if it stays, check those zones exist and offer TPUs",
        )
    return ok("compute_api", f"{facts.requests} TPU VMs and MIG slices of ours seen")
