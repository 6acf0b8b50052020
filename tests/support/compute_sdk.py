"""Decode Compute Engine exchanges with the google-cloud-compute SDK's own message classes.

``decode(record)`` takes one ``RequestRecord`` of an emulator made with
``record_responses=True`` and parses the body of an accepted request and its response with
the SDK's ``Message.from_json(text, ignore_unknown_fields=False)``: a field the SDK does not
know (a misspelling on either side) fails. Error answers are held to Google's envelope,
``{"error": {"code", "message", "errors": [{"domain", "reason", "message"}]}}``.
``decode_all(records)`` does it for every Compute Engine exchange of a test. The adapter's
tests can use it on what their own client sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from google.cloud.compute_v1 import types as sdk

from reconciler.emulator import RequestRecord

#: The SDK message of each route's request body (routes without one are absent).
REQUESTS: dict[str, Any] = {
    "compute.instances.insert": sdk.Instance,
    "compute.instances.setMetadata": sdk.Metadata,
    "compute.instanceTemplates.insert": sdk.InstanceTemplate,
    "compute.regionInstanceTemplates.insert": sdk.InstanceTemplate,
    "compute.resourcePolicies.insert": sdk.ResourcePolicy,
    "compute.instanceGroupManagers.insert": sdk.InstanceGroupManager,
    "compute.regionInstanceGroupManagers.insert": sdk.InstanceGroupManager,
    "compute.instanceGroupManagers.createInstances": (
        sdk.InstanceGroupManagersCreateInstancesRequest
    ),
    "compute.regionInstanceGroupManagers.createInstances": (
        sdk.RegionInstanceGroupManagersCreateInstancesRequest
    ),
    "compute.instanceGroupManagers.deleteInstances": (
        sdk.InstanceGroupManagersDeleteInstancesRequest
    ),
    "compute.regionInstanceGroupManagers.deleteInstances": (
        sdk.RegionInstanceGroupManagersDeleteInstancesRequest
    ),
    "compute.instanceGroupManagerResizeRequests.insert": sdk.InstanceGroupManagerResizeRequest,
    "compute.regionInstanceGroupManagerResizeRequests.insert": (
        sdk.InstanceGroupManagerResizeRequest
    ),
}
#: The SDK message of each route's answer; a route not named here answers an Operation.
RESPONSES: dict[str, Any] = {
    "compute.instances.get": sdk.Instance,
    "compute.instances.getGuestAttributes": sdk.GuestAttributes,
    "compute.instances.list": sdk.InstanceList,
    "compute.instances.aggregatedList": sdk.InstanceAggregatedList,
    "compute.instanceTemplates.get": sdk.InstanceTemplate,
    "compute.instanceTemplates.list": sdk.InstanceTemplateList,
    "compute.regionInstanceTemplates.get": sdk.InstanceTemplate,
    "compute.regionInstanceTemplates.list": sdk.InstanceTemplateList,
    "compute.resourcePolicies.get": sdk.ResourcePolicy,
    "compute.resourcePolicies.list": sdk.ResourcePolicyList,
    "compute.instanceGroupManagers.get": sdk.InstanceGroupManager,
    "compute.instanceGroupManagers.list": sdk.InstanceGroupManagerList,
    "compute.instanceGroupManagers.aggregatedList": sdk.InstanceGroupManagerAggregatedList,
    "compute.instanceGroupManagers.listManagedInstances": (
        sdk.InstanceGroupManagersListManagedInstancesResponse
    ),
    "compute.regionInstanceGroupManagers.get": sdk.InstanceGroupManager,
    "compute.regionInstanceGroupManagers.list": sdk.RegionInstanceGroupManagerList,
    "compute.regionInstanceGroupManagers.listManagedInstances": (
        sdk.RegionInstanceGroupManagersListInstancesResponse
    ),
    "compute.instanceGroupManagerResizeRequests.get": sdk.InstanceGroupManagerResizeRequest,
    "compute.instanceGroupManagerResizeRequests.list": (
        sdk.InstanceGroupManagerResizeRequestsListResponse
    ),
    "compute.regionInstanceGroupManagerResizeRequests.get": sdk.InstanceGroupManagerResizeRequest,
    "compute.regionInstanceGroupManagerResizeRequests.list": (
        sdk.RegionInstanceGroupManagerResizeRequestsListResponse
    ),
    "compute.zoneOperations.list": sdk.OperationList,
    "compute.regionOperations.list": sdk.OperationList,
    "compute.globalOperations.list": sdk.OperationList,
}
_ERROR_KEYS = {"domain", "reason", "message"}


def parse(message: Any, value: Any) -> Any:
    """``message.from_json`` of ``value``, refusing unknown fields."""
    return message.from_json(json.dumps(value), ignore_unknown_fields=False)


def check_error(body: Any, status: int) -> None:
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "errors"}, error
    assert error["code"] == status and isinstance(error["message"], str), error
    assert error["errors"] and all(set(e) == _ERROR_KEYS for e in error["errors"]), error


def decode(record: RequestRecord) -> tuple[Any, Any]:
    """(the request body, the answer) as SDK messages (None where there is none). A refused
    request's body is not decoded (tests send bad ones on purpose); its answer must be
    Google's error envelope and is returned as JSON."""
    _, name = record.key.split(" ", 1)
    assert name.startswith("compute.") and name != "compute.unknown", record.key
    if record.status != 200:
        check_error(record.response, record.status)
        return None, record.response
    request = None
    if name in REQUESTS and record.body is not None:
        request = parse(REQUESTS[name], record.body)
    assert record.response is not None, f"{record.key}: no response kept (record_responses?)"
    return request, parse(RESPONSES.get(name, sdk.Operation), record.response)


def decode_all(records: Iterable[RequestRecord]) -> int:
    """Decode every Compute Engine exchange; the number decoded."""
    count = 0
    for record in records:
        if record.path.startswith("/compute/"):
            decode(record)
            count += 1
    return count
