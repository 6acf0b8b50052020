"""Reading gcloud's output: stderr shapes recorded from gcloud 528 against a local server."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters import _gcloud_output as out
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import Operation
from reconciler.adapters.tpu_api_parse import QRState, node_from_api, request_from_api
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.capacity import RequestState
from reconciler.model.observed import NodeState

LIST = "gcloud.compute.tpus.queued-resources.list"
TOKEN_HINT = (
    " This command is authenticated with an access token from /tmp/x/token specified by the"
    " [auth/access_token_file] property"
)
HTTP_503 = (
    f"ERROR: ({LIST}) HttpError accessing <http://127.0.0.1:18999/v2/projects/test-project/"
    "locations/us-central2-b/queuedResources?alt=json>: response: <{'server': "
    "'BaseHTTP/0.6 Python/3.11.7', 'date': 'Mon, 30 Nov 2026 09:31:25 GMT', 'content-type': "
    "'text/html', 'content-length': '32', 'status': 503}>, content <<html>Service Unavailable"
    "</html>>\nThis may be due to network connectivity issues. Please check your network "
    "settings, and the status of the service you are trying to reach.\n"
)
HTTP_502_JSON = (
    f"ERROR: ({LIST}) HttpError accessing <http://127.0.0.1/x>: response: <{{'status': '502'}}>"
    ', content <{"error": {"code": 502, "message": "bad gateway"}}>\nThis may be due to ...\n'
)
CRASH = (
    'ERROR: gcloud crashed (InvalidDataFromServerError): Error decoding response "this is not '
    'json {" as type ListQueuedResourcesResponse: Expecting value: line 1 column 1 (char 0)\n\n'
    "If you would like to report this issue, please run the following command:\n"
    "  gcloud feedback\n"
)
USAGE = (
    f"ERROR: ({LIST}) unrecognized arguments: --bogus \n\n"
    "To search the help text of gcloud commands, run:\n  gcloud help -- SEARCH_TERMS\n"
)


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (
            f"ERROR: ({LIST}) RESOURCE_EXHAUSTED: Quota exceeded for quota metric\n",
            ("RESOURCE_EXHAUSTED", None, "Quota exceeded for quota metric"),
        ),
        (
            f"ERROR: ({LIST}) PERMISSION_DENIED: Permission denied on resource.{TOKEN_HINT}\n",
            ("PERMISSION_DENIED", None, "Permission denied on resource"),
        ),
        (
            f"ERROR: ({LIST}) ALREADY_EXISTS: Queued resource already exists\n"
            "- '@type': type.googleapis.com/google.rpc.ErrorInfo\n  reason: X\n",
            ("ALREADY_EXISTS", None, "Queued resource already exists"),
        ),
        (f"ERROR: ({LIST}) HTTPError 429: Too many\n", (None, 429, "Too many")),
        (f"ERROR: ({LIST}) HTTPError 400: bad zone\n", (None, 400, "bad zone")),
        (HTTP_503, (None, 503, "<html>Service Unavailable</html>")),
        (HTTP_502_JSON, (None, 502, "bad gateway")),
        (
            "Create request issued for: [a]\n"
            f"ERROR: ({LIST}) NOT_FOUND: Resource 'a' was not found\n",
            ("NOT_FOUND", None, "Resource 'a' was not found"),
        ),
    ],
)
def test_parse_stderr_api_errors(stderr: str, expected: tuple[Any, ...]) -> None:
    assert out.parse_stderr(stderr) == expected


def test_parse_stderr_crash_and_unknown_shapes_keep_the_text() -> None:
    status, code, message = out.parse_stderr(CRASH)
    assert (status, code) == (None, None)
    assert message.startswith("gcloud crashed (InvalidDataFromServerError): Error decoding")
    assert out.parse_stderr("")[2] == "gcloud failed without a message"
    assert out.parse_stderr("Traceback (most recent call last):\n  boom") == (
        None,
        None,
        "Traceback (most recent call last): boom",
    )
    assert len(out.parse_stderr("x" * 5000)[2]) == 500


BOILERPLATE = """
If you would like to report this issue, please run the following command:
  gcloud feedback

To check gcloud for common problems, please run the following command:
  gcloud info --run-diagnostics
"""


def test_a_failure_keeps_its_cause_not_gclouds_boilerplate() -> None:
    resolve = (
        "ERROR: gcloud crashed (ConnectionError): HTTPSConnectionPool(host='tpu.googleapis.com',"
        ' port=443): Max retries exceeded (Caused by NameResolutionError("Failed to resolve'
        " 'tpu.googleapis.com'\"))\n"
    )
    message = out.parse_stderr(resolve + BOILERPLATE)[2]
    assert "NameResolutionError" in message and "feedback" not in message
    odd = out.parse_stderr("WARNING: the proxy refused the connection\n" + BOILERPLATE)[2]
    assert odd == "WARNING: the proxy refused the connection"


@pytest.mark.parametrize(
    ("operation", "returncode", "stderr", "kind"),
    [
        (Operation.CREATE, 1, f"ERROR: ({LIST}) ALREADY_EXISTS: exists\n", Outcome.ALREADY),
        (Operation.DELETE, 1, f"ERROR: ({LIST}) NOT_FOUND: gone\n", Outcome.ALREADY),
        (Operation.LIST, 1, f"ERROR: ({LIST}) HTTPError 429: Too many\n", TransientCloudError),
        (Operation.LIST, 1, HTTP_503, TransientCloudError),
        (Operation.LIST, 1, CRASH, TransientCloudError),
        (Operation.LIST, 1, f"ERROR: ({LIST}) PERMISSION_DENIED: no\n", PermanentCloudError),
        (Operation.LIST, 1, f"ERROR: ({LIST}) HTTPError 403: Forbidden\n", PermanentCloudError),
        (Operation.LIST, 2, USAGE, PermanentCloudError),
        (Operation.LIST, 1, USAGE, TransientCloudError),
    ],
)
def test_failure(operation: Operation, returncode: int, stderr: str, kind: Any) -> None:
    verdict = out.failure(operation, returncode, stderr)
    if isinstance(kind, Outcome):
        assert verdict is kind
    else:
        assert type(verdict) is kind


def test_load_json() -> None:
    assert out.load_json(b'[{"a": 1}]', "list") == [{"a": 1}]
    for garbage in (b"", b"not json {", b"\xff\xfe", b"Listed 0 items."):
        with pytest.raises(TransientCloudError, match="not JSON"):
            out.load_json(garbage, "list")


QR = {
    "name": "projects/p/locations/us-central2-b/queuedResources/a",
    "state": {"state": "ACTIVE"},
    "spot": {},
}
NODE = {
    "name": "projects/p/locations/us-central2-b/nodes/a",
    "state": "READY",
    "networkEndpoints": [{"ipAddress": "10.0.0.2", "accessConfig": {"externalIp": "1.2.3.4"}}],
}


def test_parse_items_uses_the_model_parsers() -> None:
    (qr,) = out.parse_items([QR], request_from_api, "qr list")
    assert (qr.zone, qr.name, qr.mode) == ("us-central2-b", "a", "spot")
    assert qr.api_state == QRState.ACTIVE and qr.state == RequestState.ACTIVE
    (node,) = out.parse_items([NODE], node_from_api, "node list")
    assert node.state is NodeState.READY
    assert node.ips() == ("1.2.3.4",)
    assert out.parse_items([], node_from_api, "node list") == ()


@pytest.mark.parametrize(
    "data", [{"queuedResources": []}, "[]", None, [QR, {"state": "x"}], [QR, "a"], [1]]
)
def test_parse_items_rejects_unexpected_shapes_as_transient(data: Any) -> None:
    with pytest.raises(TransientCloudError):
        out.parse_items(data, request_from_api, "qr list")


def test_parse_one_turns_parser_errors_transient() -> None:
    bad_node = {"name": "n", "networkEndpoints": [{"ipAddress": "1.1.1.1"}]}  # no location
    with pytest.raises(TransientCloudError, match="unexpected resource in describe"):
        out.parse_one(bad_node, node_from_api, "describe")


def test_operation_outcome() -> None:
    op = {"name": "projects/p/locations/z/operations/op-1", "done": False, "metadata": {}}
    assert out.operation_outcome(Operation.CREATE, op, "create") is Outcome.DONE
    exists = {"done": True, "error": {"code": 6, "message": "exists"}}
    assert out.operation_outcome(Operation.CREATE, exists, "create") is Outcome.ALREADY
    denied = {"done": True, "error": {"code": 7, "message": "no permission to submit"}}
    with pytest.raises(PermanentCloudError):
        out.operation_outcome(Operation.CREATE, denied, "create")
    busy = {"done": True, "error": {"code": 9, "message": "PROVISIONING"}}
    with pytest.raises(TransientCloudError):
        out.operation_outcome(Operation.DELETE, busy, "delete")
    garbage: Any
    for garbage in ([], "done", None):
        with pytest.raises(TransientCloudError, match="expected an operation"):
            out.operation_outcome(Operation.DELETE, garbage, "delete")


def test_guest_rows() -> None:
    rows = [{"key": "k", "namespace": "ns", "value": "v", "worker_id": 0}]
    assert out.guest_rows(rows, "ga") == rows
    assert out.guest_rows([], "ga") == []
    garbage: Any
    for garbage in ({"guestAttributes": []}, ["x"], None):
        with pytest.raises(TransientCloudError):
            out.guest_rows(garbage, "ga")


def test_describe_command_is_short() -> None:
    argv = [
        "gcloud",
        "compute",
        "tpus",
        "queued-resources",
        "list",
        "--zone=us-central2-b",
        "--project=p",
        "--format=json",
        "--quiet",
    ]
    assert out.describe_command(argv) == "queued-resources list --zone=us-central2-b"
