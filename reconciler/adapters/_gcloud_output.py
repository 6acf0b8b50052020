"""Reading what gcloud printed: JSON on stdout, failures on stderr (private to ``gcloud``).

Purpose: turn one finished gcloud run (exit code, stdout, stderr) into observed values,
an ``Outcome`` or a classified cloud error. Pure: no subprocesses, no logging.

gcloud reports a failed API call on stderr in one of these shapes (checked against a local
server with gcloud 528):

- ``ERROR: (gcloud.CMD) STATUS: message`` — the API sent Google's error JSON with a status;
  a YAML list of ``details`` may follow on later lines;
- ``ERROR: (gcloud.CMD) HTTPError 429: message`` — error JSON without a status, or a plain
  text body;
- ``ERROR: (gcloud.CMD) HttpError accessing <url>: response: <{... 'status': 503}>, content
  <body>`` — 5xx answers, the raw body echoed;
- ``ERROR: gcloud crashed (Type): ...`` — a body gcloud could not decode, a refused connection;
- exit code 2 — gcloud rejected its own arguments (a bug here, never healed by retrying).

A failed ``list`` still prints ``[]`` on stdout, so the exit code is checked before stdout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from reconciler.adapters import gcloud_stderr
from reconciler.adapters.cloud import Capability, Outcome
from reconciler.adapters.cloud_errors import (
    CloudFailure,
    Operation,
    check,
    classify,
    parse_error_body,
)
from reconciler.errors import PermanentCloudError, TransientCloudError

T = TypeVar("T")

_ERROR_RE: Final = re.compile(r"^ERROR: \((gcloud[\w.-]*)\) ?(.*)$", re.MULTILINE)
_STATUS_RE: Final = re.compile(r"^([A-Z][A-Z_]+[A-Z]): ?(.*)$", re.DOTALL)
_HTTP_CODE_RE: Final = re.compile(r"^HTTPError (\d{3}): ?(.*)$", re.DOTALL)
_HTTP_ACCESS_RE: Final = re.compile(
    r"^HttpError accessing <[^>]*>: response: <(.*?)>, content <(.*)>", re.DOTALL
)
_RESPONSE_STATUS_RE: Final = re.compile(r"'status': '?(\d{3})'?")
_CRASH_RE: Final = re.compile(r"^ERROR: gcloud crashed \(([\w.]+)\): ?(.*)$", re.MULTILINE)
# gcloud's own hint, not the cloud's words (and it names a local file).
_TOKEN_HINT_RE: Final = re.compile(
    r"\.?\s*This command is authenticated with an access token from .*$", re.DOTALL
)
_DETAILS_RE: Final = re.compile(r"\n- '@type'.*$", re.DOTALL)
_USAGE_EXIT: Final = 2
_LIMIT: Final = 500


def _trim(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LIMIT else text[: _LIMIT - 3] + "..."


def parse_stderr(stderr: str) -> tuple[str | None, int | None, str]:
    """``(status, code, message)`` from gcloud's stderr; unknown shapes keep the text."""
    crash = _CRASH_RE.search(stderr)
    if crash:
        return None, None, _trim(f"gcloud crashed ({crash.group(1)}): {crash.group(2)}")
    match = _ERROR_RE.search(stderr)
    if not match:  # no ``ERROR: (gcloud...)`` line: what it said, less its boilerplate
        return (
            None,
            None,
            gcloud_stderr.message(stderr, limit=_LIMIT) or ("gcloud failed without a message"),
        )
    rest = stderr[match.start(2) :]
    access = _HTTP_ACCESS_RE.match(rest)
    if access:
        code_match = _RESPONSE_STATUS_RE.search(access.group(1))
        status, code, message = parse_error_body(access.group(2))
        if code is None and code_match:
            code = int(code_match.group(1))
        return status, code, _trim(message) or f"HTTP {code}"
    http = _HTTP_CODE_RE.match(rest)
    if http:
        return None, int(http.group(1)), _trim(http.group(2))
    status_match = _STATUS_RE.match(rest)
    if status_match:
        message = _DETAILS_RE.sub("", status_match.group(2))
        message = _TOKEN_HINT_RE.sub("", message)
        return status_match.group(1), None, _trim(message)
    return None, None, _trim(_TOKEN_HINT_RE.sub("", rest.split("\n\n", 1)[0]))


def failure(operation: Operation, returncode: int, stderr: str) -> Outcome | CloudFailure:
    """Classify a run that exited non-zero."""
    status, code, message = parse_stderr(stderr)
    if returncode == _USAGE_EXIT and status is None and code is None:
        return PermanentCloudError(f"gcloud rejected its arguments: {message}")
    return classify(operation, status=status, code=code, message=message)


def load_json(stdout: bytes, what: str) -> Any:
    """Decode gcloud's ``--format=json`` output; anything else is a transient error."""
    text = stdout.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        raise TransientCloudError(
            f"gcloud printed output that is not JSON for {what}: {_trim(text)!r}"
        ) from None


def parse_items(data: Any, parse: Callable[[Any], T], what: str) -> tuple[T, ...]:
    """A JSON list of resources, each through ``parse`` (a ``tpu_api_parse`` parser)."""
    if not isinstance(data, list):
        raise TransientCloudError(f"expected a JSON list from {what}, got {type(data).__name__}")
    return tuple(parse_one(item, parse, what) for item in data)


def parse_one(item: Any, parse: Callable[[Any], T], what: str) -> T:
    try:
        return parse(item)
    except (ValueError, TypeError, AttributeError) as exc:
        raise TransientCloudError(f"unexpected resource in {what}: {exc}") from None


def operation_name(data: Any, capability: Capability) -> str | None:
    """The ``name`` of the operation an ``--async`` create/delete printed, if it has one that
    ``capability`` can read back (anything else would block the next create or delete on an
    unreadable operation)."""
    return capability.reads(data.get("name") if isinstance(data, dict) else None)


def operation_outcome(operation: Operation, data: Any, what: str) -> Outcome:
    """The long-running operation an ``--async`` create/delete printed: DONE unless it
    already carries an error (then classified like any other failure)."""
    if not isinstance(data, dict):
        raise TransientCloudError(f"expected an operation from {what}, got {type(data).__name__}")
    error = data.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        status = error.get("status")
        return check(
            operation,
            status=status if isinstance(status, str) else None,
            code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            message=str(error.get("message", "")),
        )
    return Outcome.DONE


def guest_rows(data: Any, what: str) -> list[dict[str, Any]]:
    """gcloud flattens guest attributes into rows {worker_id, namespace, key, value}."""
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise TransientCloudError(f"expected a JSON list of objects from {what}")
    return [dict(row) for row in data]


def describe_command(argv: Sequence[str]) -> str:
    """``queued-resources list --zone=us-central2-b`` — for messages (argv holds no secrets)."""
    words = [a for a in argv[1:] if not a.startswith(("--format", "--project", "--quiet"))]
    if words[:2] == ["compute", "tpus"]:
        words = words[2:]
    return " ".join(words)
