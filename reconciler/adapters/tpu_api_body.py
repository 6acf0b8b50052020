"""A neutral ``CreateRequest`` as the Cloud TPU API's ``QueuedResource`` JSON (the REST body).

The queued resource's own encodings live here and nowhere above the adapters: the
``queueingPolicy`` a request's window becomes, ``multisliceParams`` for a multislice, the
flex-start ``provisioningModel`` and ``runDuration``, ``reservationName`` for reserved
capacity, the node's ``metadata`` (``setup.at_boot``'s ``startup-script``). Every name is
checked with ``model.names`` before it is placed. (gcloud's flags for the same create are
``adapters/_gcloud_args.py``; gcloud does this encoding itself.)

May: build JSON values, read the clock (a relative start with an end). May not: do I/O.
"""

from __future__ import annotations

import time
from typing import Any, Final

from reconciler.adapters.tpu_api_parse import FLEX_START
from reconciler.errors import UnsafeName
from reconciler.model import flex, vocabulary
from reconciler.model.boot_script import boot_metadata
from reconciler.model.names import (
    check_accelerator,
    check_labels,
    check_name,
    check_network,
    check_project,
    check_runtime_version,
    check_zone,
)
from reconciler.model.requests import CreateRequest, max_run, window
from reconciler.model.times import api_time

MODES: Final = frozenset(vocabulary.MODES)


def queueing_policy(request: CreateRequest, now: float) -> dict[str, Any] | None:
    """The API's ``QueueingPolicy`` JSON for the request, or None when it has no window.

    One start or one end maps onto its own field (``validAfterDuration``, ``validAfterTime``,
    ``validUntilDuration``). A start *and* an end are one ``validInterval {startTime,
    endTime}``, as ``gcloud ... queued-resources create`` sends them (its SetValidInterval
    hook: the policy's fields are one oneof in the API). The end of a window with a start is
    ``valid_until`` after that start: the file's "a 6h window from 20:00". ``now`` (the time
    the request is sent) turns a relative start into an absolute one; nothing else uses it."""
    after, at, until = window(request)
    if after is None and at is None:
        return None if until is None else {"validUntilDuration": f"{until}s"}
    if until is None:
        return (
            {"validAfterDuration": f"{after}s"}
            if after is not None
            else {"validAfterTime": api_time(at or 0.0)}
        )
    start = at if at is not None else now + (after or 0)
    return {"validInterval": {"startTime": api_time(start), "endTime": api_time(start + until)}}


def create_body(project: str, request: CreateRequest, now: float | None = None) -> dict[str, Any]:
    """The QueuedResource JSON gcloud (GA, API v2) sends for the same create, names checked.
    Labels are the request's own (the planner adds ``managed-by``), as with the gcloud backend;
    the empty ``metadata`` and ``serviceAccount`` are gcloud's too (measured against the emulator).

    ``reserved`` is ``reservationName: projects/P/locations/Z/reservations/-``: that is what
    ``gcloud compute tpus queued-resources create --reserved`` sends on v2, whose
    ``Guaranteed`` message has no ``reserved`` field (only v2alpha1 has one).
    The queueing window is ``queueing_policy``; ``now`` (default: the clock) only anchors a
    relative start that comes with an end.
    """
    check_project(project)
    check_name(request.name)
    zone = check_zone(request.zone)
    if request.mode not in MODES:
        raise UnsafeName(
            f"invalid mode {request.mode!r}: expected spot, on-demand, reserved or flex-start"
        )
    check_labels(request.labels)
    network: dict[str, Any] = {"enableExternalIps": not request.internal_ips}
    if request.network:
        network["network"] = check_network(request.network)
    if request.subnetwork:
        network["subnetwork"] = check_network(request.subnetwork)
    parent = f"projects/{project}/locations/{zone}"
    body: dict[str, Any] = {}
    policy = queueing_policy(request, time.time() if now is None else now)
    if policy is not None:
        body["queueingPolicy"] = policy
    if request.mode == "spot":
        body["spot"] = {}
    elif request.mode == "reserved":
        body["reservationName"] = f"{parent}/reservations/-"
    elif request.mode == flex.MODE:  # v2alpha1, as `gcloud alpha ... --provisioning-model`
        body["provisioningModel"] = FLEX_START
        body["runDuration"] = {"maxRunDuration": f"{max_run(request)}s"}
    body["tpu"] = {
        "nodeSpec": [
            {
                "node": {
                    "acceleratorType": check_accelerator(request.accelerator),
                    **({"labels": dict(sorted(request.labels.items()))} if request.labels else {}),
                    "metadata": boot_metadata(request.startup_script),
                    "networkConfig": network,
                    "runtimeVersion": check_runtime_version(request.image),
                    "serviceAccount": {},
                },
                "nodeId": request.name,
                "parent": parent,
            }
        ]
    }
    if request.slices > 1:  # multislice: nodes <name>-0 ... instead of one named node
        spec = body["tpu"]["nodeSpec"][0]
        del spec["nodeId"]
        # v2alpha1 (where a flex-start create goes) names the same message multiNodeParams
        key = "multiNodeParams" if request.mode == flex.MODE else "multisliceParams"
        spec[key] = {"nodeCount": request.slices, "nodeIdPrefix": request.name}
    return body
