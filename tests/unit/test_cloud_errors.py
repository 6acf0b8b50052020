"""Failure classification shared by the gcloud and REST backends."""

from __future__ import annotations

import pytest

from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import (
    DEFAULT_DELAY,
    QUOTA_DELAY,
    Operation,
    check,
    classify,
    classify_body,
    parse_error_body,
    status_for,
)
from reconciler.errors import CloudError, PermanentCloudError, TransientCloudError

OPS = list(Operation)


@pytest.mark.parametrize(
    ("operation", "status", "code"),
    [
        (Operation.CREATE, "ALREADY_EXISTS", None),
        (Operation.CREATE, None, 6),
        (Operation.CREATE, None, 409),
        (Operation.DELETE, "NOT_FOUND", 404),
        (Operation.DELETE, None, 404),
        (Operation.DELETE, None, 5),
        (Operation.GET, "NOT_FOUND", None),
    ],
)
def test_done(operation: Operation, status: str | None, code: int | None) -> None:
    message = "queued resource already exists" if code == 409 else "gone"
    assert classify(operation, status=status, code=code, message=message) is Outcome.ALREADY


@pytest.mark.parametrize(
    ("operation", "status"),
    [
        (Operation.DELETE, "ALREADY_EXISTS"),
        (Operation.CREATE, "NOT_FOUND"),  # e.g. the network does not exist
        (Operation.LIST, "NOT_FOUND"),
    ],
)
def test_done_only_for_the_matching_operation(operation: Operation, status: str) -> None:
    assert isinstance(classify(operation, status=status, message="x"), PermanentCloudError)


def test_bare_409_without_exists_is_a_conflict_not_done() -> None:
    verdict = classify(Operation.CREATE, code=409, message="concurrent modification")
    assert isinstance(verdict, TransientCloudError)
    assert verdict.status == "ABORTED"


@pytest.mark.parametrize(
    ("status", "code", "delay"),
    [
        ("RESOURCE_EXHAUSTED", None, QUOTA_DELAY),
        (None, 429, QUOTA_DELAY),
        (None, 8, QUOTA_DELAY),
        ("UNAVAILABLE", 503, DEFAULT_DELAY),
        (None, 503, DEFAULT_DELAY),
        (None, 502, DEFAULT_DELAY),
        ("DEADLINE_EXCEEDED", None, DEFAULT_DELAY),
        (None, 504, DEFAULT_DELAY),
        ("INTERNAL", 500, DEFAULT_DELAY),
        (None, 500, DEFAULT_DELAY),
        (None, 599, DEFAULT_DELAY),
        ("SOMETHING_NEW", None, DEFAULT_DELAY),
        (None, None, DEFAULT_DELAY),
    ],
)
@pytest.mark.parametrize("operation", OPS)
def test_transient(
    operation: Operation, status: str | None, code: int | None, delay: float
) -> None:
    verdict = classify(operation, status=status, code=code, message="try later")
    assert isinstance(verdict, TransientCloudError)
    assert verdict.delay == delay
    assert "try later" in verdict.message


def test_quota_waits_longer_than_other_transients() -> None:
    assert QUOTA_DELAY > DEFAULT_DELAY


@pytest.mark.parametrize("status", ["FAILED_PRECONDITION", "UNAUTHENTICATED", "ABORTED"])
def test_states_that_heal_over_time_are_transient(status: str) -> None:
    verdict = classify(Operation.DELETE, status=status, message="not now")
    assert isinstance(verdict, TransientCloudError)
    assert verdict.delay >= DEFAULT_DELAY


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("PERMISSION_DENIED", None),
        (None, 403),
        (None, 7),
        ("INVALID_ARGUMENT", None),
        (None, 400),
        ("OUT_OF_RANGE", None),
        ("UNIMPLEMENTED", None),
    ],
)
@pytest.mark.parametrize("operation", OPS)
def test_permanent(operation: Operation, status: str | None, code: int | None) -> None:
    verdict = classify(operation, status=status, code=code, message="denied")
    assert isinstance(verdict, PermanentCloudError)
    assert verdict.status == status_for(status, code)


@pytest.mark.parametrize("status", [None, "RESOURCE_EXHAUSTED", "INTERNAL", "PERMISSION_DENIED"])
def test_closed_queue_is_permanent_whatever_the_status(status: str | None) -> None:
    message = "Project has No permission to submit into this queue."
    verdict = classify(Operation.CREATE, status=status, message=message)
    assert isinstance(verdict, PermanentCloudError)
    assert "No permission to submit into this queue" in verdict.message


def test_the_clouds_message_is_kept_with_its_status_and_code() -> None:
    verdict = classify(
        Operation.CREATE, status="permission_denied", code=403, message="caller lacks tpu.create"
    )
    assert isinstance(verdict, CloudError)
    assert verdict.message == "PERMISSION_DENIED: caller lacks tpu.create"
    assert (verdict.status, verdict.code) == ("PERMISSION_DENIED", 403)
    already = classify(Operation.LIST, status="INTERNAL", message="INTERNAL: boom")
    assert isinstance(already, CloudError)
    assert already.message == "INTERNAL: boom"


def test_an_empty_message_still_says_something() -> None:
    verdict = classify(Operation.LIST, code=503)
    assert isinstance(verdict, CloudError)
    assert verdict.message == "UNAVAILABLE"
    bare = classify(Operation.LIST)
    assert isinstance(bare, CloudError)
    assert bare.message


def test_retry_after_only_lengthens_the_delay() -> None:
    longer = classify(Operation.LIST, code=429, retry_after=300)
    shorter = classify(Operation.LIST, code=429, retry_after=1)
    assert isinstance(longer, TransientCloudError)
    assert isinstance(shorter, TransientCloudError)
    assert (longer.delay, shorter.delay) == (300.0, QUOTA_DELAY)


def test_check_raises_or_returns_already() -> None:
    assert check(Operation.DELETE, status="NOT_FOUND") is Outcome.ALREADY
    with pytest.raises(TransientCloudError):
        check(Operation.DELETE, status="UNAVAILABLE")
    with pytest.raises(PermanentCloudError):
        check(Operation.CREATE, status="INVALID_ARGUMENT")


def test_parse_error_body_google_shape() -> None:
    body = b'{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}'
    assert parse_error_body(body) == ("RESOURCE_EXHAUSTED", 429, "Quota exceeded")
    listed = '[{"error": {"code": 403, "message": "no", "status": "PERMISSION_DENIED"}}]'
    assert parse_error_body(listed) == (None, None, listed)
    wrapped = '{"error": [{"code": 403, "message": "no", "status": "PERMISSION_DENIED"}]}'
    assert parse_error_body(wrapped) == ("PERMISSION_DENIED", 403, "no")


@pytest.mark.parametrize(
    "body", ["<html>Bad Gateway</html>", "", "null", '{"error": "text"}', b"\xff\xfe", "[1]"]
)
def test_parse_error_body_never_raises_on_garbage(body: str | bytes) -> None:
    status, code, message = parse_error_body(body)
    assert (status, code) == (None, None)
    assert isinstance(message, str)


def test_classify_body_falls_back_to_the_http_code() -> None:
    assert isinstance(
        classify_body(Operation.LIST, 503, "<html>Service Unavailable</html>"),
        TransientCloudError,
    )
    assert (
        classify_body(
            Operation.CREATE,
            409,
            '{"error": {"code": 409, "message": "exists", "status": "ALREADY_EXISTS"}}',
        )
        is Outcome.ALREADY
    )
    denied = classify_body(Operation.LIST, 403, "Forbidden")
    assert isinstance(denied, PermanentCloudError)
    assert denied.code == 403
