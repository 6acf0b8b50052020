"""One HTTP-status table (``model.rpc_codes``) for the controller and the emulator: a bare
status reads as the same name on both sides, and the names follow Google's API error model
(409 ABORTED or ALREADY_EXISTS, 412 FAILED_PRECONDITION)."""

from __future__ import annotations

import pytest

from reconciler.adapters.cloud_errors import PRECONDITION_DELAY, Operation, classify, status_for
from reconciler.core import retry
from reconciler.emulator._scenario import Fault
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.rpc_codes import HTTP_OF_STATUS, RPC_CODES, STATUS_OF_HTTP, status_of_http


@pytest.mark.parametrize(
    ("code", "message", "name"),
    [
        (400, "", "INVALID_ARGUMENT"),
        (401, "", "UNAUTHENTICATED"),
        (403, "", "PERMISSION_DENIED"),
        (404, "", "NOT_FOUND"),
        (409, "concurrent modification", "ABORTED"),
        (409, "The resource 'x' already exists", "ALREADY_EXISTS"),
        (412, "Supplied fingerprint does not match", "FAILED_PRECONDITION"),
        (429, "", "RESOURCE_EXHAUSTED"),
        (499, "", "CANCELLED"),
        (500, "", "INTERNAL"),
        (501, "", "UNIMPLEMENTED"),
        (502, "", "UNAVAILABLE"),
        (503, "", "UNAVAILABLE"),
        (504, "", "DEADLINE_EXCEEDED"),
        (507, "", "INTERNAL"),  # another 5xx
        (418, "", None),  # not in Google's model
    ],
)
def test_a_bare_status_names_googles_status(code: int, message: str, name: str | None) -> None:
    assert status_of_http(code, message) == name
    assert status_for(None, code, message) == name  # the controller reads it so


@pytest.mark.parametrize("code", sorted(STATUS_OF_HTTP))
def test_the_emulator_and_the_controller_read_a_status_alike(code: int) -> None:
    injected = Fault(status=code)
    assert injected.status_name == status_for(None, code, "injected by the emulator")
    named = injected.status_name
    assert named is not None
    # a name travels back with its own status, but for a proxy's 502 and Compute Engine's 412
    # (Google's model serves UNAVAILABLE with 503 and FAILED_PRECONDITION with 400)
    assert HTTP_OF_STATUS[named] == code or code in (412, 502)


def test_every_status_name_travels_with_an_http_status() -> None:
    assert set(HTTP_OF_STATUS) == set(RPC_CODES) - {"OK"}
    for name, code in HTTP_OF_STATUS.items():
        assert Fault(status=name).http_status == code
        assert STATUS_OF_HTTP.get(code) is not None


def test_a_stale_fingerprint_is_retried_as_a_precondition() -> None:
    verdict = classify(Operation.OTHER, code=412, message="conditionNotMet")
    assert isinstance(verdict, TransientCloudError)
    assert (verdict.status, verdict.delay) == ("FAILED_PRECONDITION", PRECONDITION_DELAY)


def test_googles_retry_rule_covers_the_table_s_429_and_5xx_names() -> None:
    assert {
        "RESOURCE_EXHAUSTED",
        "INTERNAL",
        "UNKNOWN",
        "DATA_LOSS",
        "UNAVAILABLE",
        "DEADLINE_EXCEEDED",
    } == retry.RATE_OR_SERVER  # not UNIMPLEMENTED: a 501 is permanent (``classify``)
    assert isinstance(classify(Operation.CREATE, status="UNIMPLEMENTED"), PermanentCloudError)
