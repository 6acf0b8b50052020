"""Turning a create request (or a scenario's queued resource) into a new ``QRRecord``.

Pure validation and construction: no clock of its own (the caller passes the emulated time
and a ``Clock`` for absolute timestamps), no I/O. Refusals are ``ApiError``s in Google's terms.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.emulator._records import ApiError, Clock, QRRecord
from reconciler.emulator._scenario import ScenarioQueuedResource
from reconciler.model.names import ACCELERATOR_RE, NAME_RE, ZONE_RE

_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)s$")
#: The top-level QueuedResource fields that choose the tier; copied into the record.
TIER_FIELDS = ("spot", "guaranteed", "reservationName")


def check_zone(zone: str) -> None:
    if not ZONE_RE.fullmatch(zone):
        raise ApiError("INVALID_ARGUMENT", f"invalid location {zone!r}")


def from_request(zone: str, qr_id: str | None, body: Any, *, seq: int, now: float) -> QRRecord:
    """Validate a ``queuedResources.create`` request; the record starts CREATING at ``now``."""
    check_zone(zone)
    if not qr_id or not NAME_RE.fullmatch(qr_id):
        raise ApiError("INVALID_ARGUMENT", f"invalid queuedResourceId {qr_id!r}")
    if not isinstance(body, dict):
        raise ApiError("INVALID_ARGUMENT", "the request body must be a QueuedResource")
    specs = (body.get("tpu") or {}).get("nodeSpec")
    if not isinstance(specs, list) or len(specs) != 1 or not isinstance(specs[0], dict):
        raise ApiError("INVALID_ARGUMENT", "the emulator supports exactly one tpu.nodeSpec")
    node = specs[0].get("node")
    node_id = specs[0].get("nodeId")
    # v2 names it multisliceParams, v2alpha1 multiNodeParams
    params = specs[0].get("multisliceParams") or specs[0].get("multiNodeParams")
    count, node_id = _multislice(qr_id, params, node_id)
    if not isinstance(node, dict) or not isinstance(node_id, str) or not node_id:
        raise ApiError("INVALID_ARGUMENT", "nodeSpec needs a node and a nodeId")
    accelerator = node.get("acceleratorType")
    if not isinstance(accelerator, str) or not ACCELERATOR_RE.fullmatch(accelerator):
        raise ApiError("INVALID_ARGUMENT", f"unsupported acceleratorType {accelerator!r}")
    if not node.get("runtimeVersion"):
        raise ApiError("INVALID_ARGUMENT", "node.runtimeVersion is required")
    tier = {k: body[k] for k in TIER_FIELDS if k in body}
    policy = body.get("queueingPolicy")
    policy = policy if isinstance(policy, dict) else None
    record = QRRecord(zone, qr_id, seq, node_id, accelerator, node, tier, policy, now)
    record.max_run = flex_run(body)
    record.node_count = count
    return record


def flex_run(body: dict[str, Any]) -> float | None:
    """A flex-start create's run length in seconds (v2alpha1), None for any other model."""
    model = body.get("provisioningModel")
    if model in (None, "PROVISIONING_MODEL_UNSPECIFIED", "STANDARD", "SPOT"):
        return None
    if model != "FLEX_START":
        raise ApiError("INVALID_ARGUMENT", f"unsupported provisioningModel {model!r}")
    run = (body.get("runDuration") or {}).get("maxRunDuration")
    m = _DURATION.match(str(run or ""))
    if m is None or not 0 < float(m.group(1)) <= 7 * 86400:
        raise ApiError("INVALID_ARGUMENT", "FLEX_START needs runDuration.maxRunDuration <= 7d")
    return float(m.group(1))


def _multislice(qr_id: str, params: Any, node_id: Any) -> tuple[int, Any]:
    """(node count, node id or multislice prefix) of a nodeSpec: ``multisliceParams`` (count
    > 1, prefix default the QR id) instead of a ``nodeId``, as the v2 API documents."""
    if params is None:
        return 1, node_id
    if node_id is not None:
        raise ApiError("INVALID_ARGUMENT", "nodeSpec takes a nodeId or multisliceParams, not both")
    count = params.get("nodeCount") if isinstance(params, dict) else None
    if isinstance(count, str) and count.isdigit():
        count = int(count)
    if not isinstance(count, int) or isinstance(count, bool) or count <= 1:
        raise ApiError("INVALID_ARGUMENT", "multisliceParams.nodeCount must be greater than 1")
    prefix = params.get("nodeIdPrefix") or qr_id
    if not isinstance(prefix, str) or not NAME_RE.fullmatch(prefix):
        raise ApiError("INVALID_ARGUMENT", f"invalid multisliceParams.nodeIdPrefix {prefix!r}")
    return count, prefix


def from_scenario(spec: ScenarioQueuedResource, *, seq: int, now: float) -> QRRecord:
    """A record shaped as if gcloud had created it; the caller puts it in ``spec.state``."""
    check_zone(spec.zone)
    tier: dict[str, Any] = {}
    if spec.mode == "spot":
        tier = {"spot": {}}
    elif spec.mode == "reserved":
        tier = {"reservationName": f"projects/-/locations/{spec.zone}/reservations/-"}
    node = {
        "acceleratorType": spec.accelerator,
        "runtimeVersion": spec.runtime_version,
        "labels": dict(spec.labels),
        "networkConfig": {"enableExternalIps": True},
    }
    policy = None
    if spec.valid_until is not None:
        policy = {"validUntilDuration": f"{int(spec.valid_until)}s"}
    node_id = spec.node_id or spec.name
    record = QRRecord(spec.zone, spec.name, seq, node_id, spec.accelerator, node, tier, policy, now)
    record.node_count = spec.slices
    if spec.mode == "flex-start":  # as v2alpha1 creates it: FLEX_START with a run duration
        record.max_run = spec.max_run_duration
    return record


def apply_policy(q: QRRecord, clock: Clock) -> None:
    """Set the record's deadline (validUntil*, validInterval.endTime) and earliest start
    (validAfter*, validInterval.startTime)."""
    policy = q.queueing_policy or {}
    try:
        if m := _DURATION.match(str(policy.get("validUntilDuration", ""))):
            q.deadline = q.created + float(m.group(1))
        if policy.get("validUntilTime"):
            q.deadline = clock.parse(str(policy["validUntilTime"]))
        if m := _DURATION.match(str(policy.get("validAfterDuration", ""))):
            q.valid_after = q.created + float(m.group(1))
        if policy.get("validAfterTime"):
            q.valid_after = clock.parse(str(policy["validAfterTime"]))
        interval = policy.get("validInterval")
        if isinstance(interval, dict):  # [startTime, endTime): not granted outside it
            if interval.get("startTime"):
                q.valid_after = clock.parse(str(interval["startTime"]))
            if interval.get("endTime"):
                q.deadline = clock.parse(str(interval["endTime"]))
    except ValueError as exc:
        raise ApiError("INVALID_ARGUMENT", f"bad queueingPolicy: {exc}") from None
