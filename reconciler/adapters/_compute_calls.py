"""Compute Engine's v1 REST calls, shared by its cloud (``adapters/compute.py``) and the cloud's
MIG slice path (``adapters/_compute_mig.py``), over the cloud's one session
(``adapters/google_http.GoogleSession``):

- lists, every page (a repeated page token, or more than ``MAX_PAGES`` pages, is a malformed
  answer): one zone's or the global collection (``items``), and an ``aggregated/`` one with
  the zones whose scope said ``UNREACHABLE`` (``aggregated``);
- a change (``mutate``) carries its own ``requestId`` and is sent once more with the same id
  when the first try got no answer at all, so the service dedupes a resend;
- an operation read (``status``), waited for (``wait``: ``operations.wait``, at most
  ``STEP_TIMEOUT``), what a failed one means (``failure``), what an accepted one is
  (``done``);
- a create that met its name already there (``owned``): fine when it is this slot's, else a
  permanent error naming whose it is.

May: send HTTP requests through the session. Must: check every name before it reaches a URL.
May not: decide what capacity to hold, keep anything between calls.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from reconciler.adapters import compute_body as cb
from reconciler.adapters import compute_parse as cp
from reconciler.adapters.cloud import OperationStatus, Outcome, Submitted
from reconciler.adapters.cloud_errors import CloudFailure, Operation, classify
from reconciler.adapters.google_http import GoogleSession
from reconciler.errors import PermanentCloudError, TransientCloudError, UnsafeName
from reconciler.model.names import check_zone

CAPABILITY: Final = cp.capability()
MAX_PAGES: Final = 1000
#: Longest a create waits for one step's operation.
STEP_TIMEOUT: Final = 300.0
#: What the parsers raise on JSON of the wrong shape: all mean "malformed", none may crash us.
PARSE_ERRORS: Final = (ValueError, TypeError, AttributeError, KeyError, IndexError)


class ComputeCalls:
    """The calls of ``http``'s project (``base``: its URL); a list page asks for ``page_size``
    items, ``clock`` times a wait."""

    def __init__(self, http: GoogleSession, *, page_size: int, clock: Callable[[], float]) -> None:
        self.http = http
        self.project = http.project
        self.page_size = page_size
        self.clock = clock
        self.base = f"{http.endpoint}projects/{self.project}/"

    # --- lists ---------------------------------------------------------------------------

    async def aggregated(self, collection: str, filter_: str | None) -> tuple[list[Any], set[str]]:
        """Every item of ``aggregated/<collection>`` over all pages, and the zones whose
        scope said UNREACHABLE."""
        url = f"{self.base}aggregated/{collection}"
        base: dict[str, str] = {"maxResults": str(self.page_size), "returnPartialSuccess": "true"}
        if filter_:
            base["filter"] = filter_
        items: list[Any] = []
        unreachable: set[str] = set()
        for page in await self.pages(url, base, f"aggregated/{collection}"):
            scopes = page.get("items") or {}
            if not isinstance(scopes, dict):
                raise self.http.malformed(collection, "items is not an object")
            for scope, entry in scopes.items():
                if not isinstance(entry, dict):
                    raise self.http.malformed(collection, f"{scope} is not an object")
                found = entry.get(collection) or []
                if not isinstance(found, list):
                    raise self.http.malformed(collection, f"{scope}.{collection} is not a list")
                items.extend(found)
                warning = entry.get("warning")
                if (
                    isinstance(warning, dict)
                    and warning.get("code") == "UNREACHABLE"
                    and str(scope).startswith("zones/")
                ):
                    unreachable.add(check_zone(str(scope).split("/", 1)[1]))
        return items, unreachable

    async def items(self, url: str, field: str, filter_: str | None) -> list[Any]:
        """Every ``field`` item of the list at ``url`` over all pages."""
        params = {"maxResults": str(self.page_size), **({"filter": filter_} if filter_ else {})}
        out: list[Any] = []
        for page in await self.pages(url, params, url.rsplit("/", 1)[-1]):
            found = page.get(field) or []
            if not isinstance(found, list):
                raise self.http.malformed(field, "not a list")
            out += found
        return out

    async def pages(self, url: str, params: Mapping[str, str], what: str) -> list[dict[str, Any]]:
        pages: list[dict[str, Any]] = []
        seen: set[str] = set()
        query = dict(params)
        for _ in range(MAX_PAGES):
            page = await self.http.call(Operation.LIST, "GET", url, params=query)
            if isinstance(page, Outcome):  # pragma: no cover - LIST never yields ALREADY
                raise self.http.malformed(what, "no list")
            pages.append(page)
            token = page.get("nextPageToken") or None
            if token is None:
                return pages
            if not isinstance(token, str) or token in seen:
                raise self.http.malformed(what, "pagination repeats or is not a token")
            seen.add(token)
            query = {**params, "pageToken": token}
        raise self.http.malformed(what, f"more than {MAX_PAGES} pages")

    # --- changes and their operations ----------------------------------------------------

    async def mutate(
        self, method: str, url: str, *, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | Outcome:
        """One change with its own ``requestId``, sent once more with the same id when the
        first try got no answer at all (so the service dedupes it)."""
        params = {"requestId": str(uuid.uuid4())}
        operation = Operation.DELETE if method == "DELETE" else Operation.CREATE
        try:
            return await self.http.call(operation, method, url, params=params, body=body)
        except TransientCloudError as e:
            if e.code is not None:  # the service answered: not a lost request
                raise
            return await self.http.call(operation, method, url, params=params, body=body)

    def status(self, answer: Mapping[str, Any]) -> OperationStatus:
        try:
            return cp.operation_status(answer)
        except PARSE_ERRORS as exc:
            raise self.http.malformed("operation", str(exc)) from None

    async def wait(self, answer: Mapping[str, Any]) -> OperationStatus:
        """Wait for an operation (``operations.wait``, at most ``STEP_TIMEOUT``)."""
        status = self.status(answer)
        deadline = self.clock() + STEP_TIMEOUT
        pause = 0.05
        while not status.done:
            if self.clock() > deadline:
                raise TransientCloudError(
                    f"operation {status.name} did not finish within {STEP_TIMEOUT:g}s", delay=30
                )
            url = f"{self.http.endpoint}{check_operation_name(status.name)}/wait"
            again = await self.http.call(Operation.GET, "POST", url)
            if isinstance(again, Outcome):
                raise TransientCloudError(f"operation {status.name} was forgotten", delay=30)
            status = self.status(again)
            if not status.done:  # a wait that answered early (it may): not in a tight loop
                await asyncio.sleep(pause)
                pause = min(2.0, pause * 2)
        return status

    # --- creates ---------------------------------------------------------------------------

    async def owned(self, collection: str, zone: str, name: str, slot: str) -> None:
        """A create met ``name`` already there: fine when it is this slot's, else a
        permanent error naming whose it is."""
        got = await self.http.call(
            Operation.GET, "GET", f"{self.base}zones/{zone}/{collection}/{name}"
        )
        if isinstance(got, Outcome):
            raise TransientCloudError(f"{name} exists and then does not; looking again", delay=5)
        if collection == "instances":
            labels = got.get("labels") or {}
            owner = labels.get(cb.LABEL_SLOT) if isinstance(labels, dict) else None
        else:
            owner = (cb.described(got.get("description")) or {}).get("slot")
        if owner != slot:
            whose = f"slot {owner}'s" if owner else "not made by tpu-reconciler"
            raise PermanentCloudError(
                f"the name {name} is taken in {zone} ({whose}); rename slot {slot} "
                "or remove that resource",
                status="ALREADY_EXISTS",
                code=409,
            )


def check_operation_name(name: str) -> str:
    """``projects/P/{zones/Z|regions/R|global}/operations/OP``, nothing else (a URL path)."""
    if CAPABILITY.reads(name) is None:
        raise UnsafeName(f"invalid operation name {str(name)[:120]!r}")
    return name


def done(status: OperationStatus) -> Submitted:
    """An accepted change, with its operation when the cloud can read it back."""
    return Submitted(Outcome.DONE, CAPABILITY.reads(status.name))


def failure(status: OperationStatus, operation: Operation = Operation.CREATE) -> CloudFailure:
    """The error a failed operation means (``compute_parse.failure`` chose its code)."""
    message = status.error_message or "the operation failed"
    verdict = classify(operation, code=status.error_code, message=message)
    if isinstance(verdict, Outcome):  # a create's 409 / a delete's 404: said by the caller
        return PermanentCloudError(message, status="ALREADY_EXISTS", code=status.error_code)
    return verdict


__all__ = [
    "CAPABILITY",
    "MAX_PAGES",
    "PARSE_ERRORS",
    "STEP_TIMEOUT",
    "ComputeCalls",
    "check_operation_name",
    "done",
    "failure",
]
