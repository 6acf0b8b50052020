"""One authenticated HTTP session to a Google REST API (httpx, async, keep-alive), shared by
the clouds that speak REST: the Cloud TPU API's (``adapters/rest.py``) and Compute Engine's
(``adapters/compute.py``).

What it does for every request: a bearer token from ``adapters.auth`` (a 401 fetches a fresh
one once and sends the request once more, however many requests were refused at the same
time), ``X-Goog-User-Project`` when ``auth.choose_quota_project`` says so (as gcloud does), at
most ``concurrency`` requests in flight, a timeout, and the translation of every transport
failure into ``TransientCloudError``. An answer that is not a JSON object is a transient
"malformed answer" error (an observation is either complete or not returned at all); an HTTP
error is classified by the caller's ``classify`` (``adapters.cloud_errors.classify_body`` by
default) into ``Outcome.ALREADY`` or the error to raise.

``SessionCloud`` is what both clouds are besides their API: a project, an endpoint (the
caller's, else gcloud's override in the environment, else the API's own: ``endpoint_from``),
one session built from the keyword arguments both take (``SessionOptions``), the requests
sent, the quota project, ``async with`` and ``aclose``.

``check_endpoint``: an http(s) base URL; plain http only to loopback (tokens travel on it),
and then without the environment's proxies. httpx logs every request at INFO; those lines go
through only when this package logs at DEBUG (``-v``).

May: send HTTP requests, read tokens. Must: never log or raise with a token. May not: build
URLs from unchecked names (the callers check them), decide anything.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Self, TypedDict, TypeVar, Unpack

import httpx

from reconciler import __version__
from reconciler.adapters.auth import (
    QuotaChoice,
    TokenProvider,
    choose_quota_project,
    token_provider_from_env,
)
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import (
    DEFAULT_DELAY,
    CloudFailure,
    Operation,
    classify_body,
)
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.names import check_project

log = logging.getLogger(__name__)

#: Classifies an HTTP error answer: (what was done, HTTP status, body, Retry-After seconds).
Classifier = Callable[[Operation, int, bytes, "float | None"], "Outcome | CloudFailure"]

T = TypeVar("T")
U = TypeVar("U")
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain"})


class _OnlyWhenVerbose(logging.Filter):
    """httpx logs every request at INFO ("HTTP Request: GET ..."): at a 1 s fast poll that is
    ~170,000 journal lines a day. Let them through only when this package logs at DEBUG
    (``-v``); the event log is the record of what the controller did."""

    def filter(self, record: logging.LogRecord) -> bool:
        return log.isEnabledFor(logging.DEBUG)


_HTTPX_LOG = logging.getLogger("httpx")
if not any(isinstance(f, _OnlyWhenVerbose) for f in _HTTPX_LOG.filters):
    _HTTPX_LOG.addFilter(_OnlyWhenVerbose())


def _default_classifier(
    operation: Operation, status: int, body: bytes, retry: float | None
) -> Outcome | CloudFailure:
    return classify_body(operation, status, body, retry_after=retry)


class GoogleSession:
    """Requests to one Google API for one project. Share one per event loop; ``aclose`` it.
    ``title`` names the API in messages ("the TPU API", "Compute Engine")."""

    def __init__(
        self,
        project: str,
        endpoint: str,
        *,
        title: str,
        token_provider: TokenProvider | None = None,
        concurrency: int = 8,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        quota_project: str | None = None,
        adc: bool = False,
        classifier: Classifier = _default_classifier,
    ) -> None:
        env = os.environ if env is None else env
        self.title = title
        self.project = check_project(project)
        self.endpoint = check_endpoint(endpoint, title)
        self.quota_setting = check_project(quota_project) if quota_project else None
        self.timeout = timeout
        self.classifier = classifier
        self._tokens = (
            token_provider if token_provider is not None else token_provider_from_env(env, adc=adc)
        )
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._refresh_lock = asyncio.Lock()
        self.requests_sent = 0  # HTTP requests so far (the metrics' requests per poll)
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(
                max_connections=max(1, concurrency), max_keepalive_connections=max(1, concurrency)
            ),
            headers={"user-agent": f"tpu-reconciler/{__version__}"},
            # Proxies from the environment are for the real API, never for a local emulator.
            trust_env=not is_loopback(httpx.URL(self.endpoint).host),
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def quota_choice(self) -> QuotaChoice:
        """The ``X-Goog-User-Project`` sent and why (complete once a token was fetched)."""
        return choose_quota_project(self.quota_setting, self._tokens.quota, self.project)

    def quota_note(self) -> str:
        choice = self.quota_choice()
        return f"{choice.project or 'no X-Goog-User-Project header'} ({choice.source})"

    async def call(
        self,
        operation: Operation,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | Outcome:
        """The JSON object answered, or ``Outcome.ALREADY``; raises the classified failure."""
        response = await self.send(method, url, params=params, body=body)
        if not response.is_success:
            verdict = self.classifier(
                operation,
                response.status_code,
                response.content,
                retry_after(response.headers.get("retry-after")),
            )
            if isinstance(verdict, Outcome):
                return verdict
            raise verdict
        try:
            data = json.loads(response.content)
        except ValueError:
            raise self.malformed(
                operation.value, snippet(response), code=response.status_code
            ) from None
        if not isinstance(data, dict):
            raise self.malformed(operation.value, "not a JSON object", code=response.status_code)
        return data

    async def send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None,
        body: Mapping[str, Any] | None,
    ) -> httpx.Response:
        """One request (two after a 401: a fresh token, then the same request once more)."""
        path = httpx.URL(url).path
        async with self._slots:
            for attempt in (1, 2):
                token = await self._tokens.token()
                headers = {"authorization": f"Bearer {token}"}
                quota = self.quota_choice().project
                if quota:
                    headers["x-goog-user-project"] = quota
                started = time.monotonic()
                self.requests_sent += 1
                try:
                    response = await self._client.request(
                        method, url, params=params, json=body, headers=headers
                    )
                except httpx.TimeoutException:
                    raise TransientCloudError(
                        f"{method} {path}: no answer within {self.timeout:g}s",
                        delay=DEFAULT_DELAY,
                        status="DEADLINE_EXCEEDED",
                    ) from None
                except httpx.HTTPError as exc:
                    raise TransientCloudError(
                        f"{method} {path}: {type(exc).__name__}: {exc}",
                        delay=DEFAULT_DELAY,
                        status="UNAVAILABLE",
                    ) from None
                log.debug(
                    "%s %s -> %d in %.0f ms",
                    method,
                    path,
                    response.status_code,
                    (time.monotonic() - started) * 1000,
                )
                if response.status_code != 401 or attempt == 2:
                    return response
                log.info("%s refused the access token (401); fetching a fresh one", self.title)
                await self._refresh(token)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _refresh(self, refused: str) -> None:
        """Invalidate the token once, however many requests were refused at the same time."""
        async with self._refresh_lock:
            if await self._tokens.token() == refused:
                self._tokens.invalidate()

    def malformed(self, what: str, detail: str, *, code: int | None = None) -> TransientCloudError:
        return TransientCloudError(
            f"malformed answer from {self.title} ({what}): {detail}", delay=DEFAULT_DELAY, code=code
        )


class SessionOptions(TypedDict, total=False):
    """How a REST cloud reaches its API: the keyword arguments ``RestCloud`` and
    ``ComputeCloud`` take and hand to their ``GoogleSession`` (whose defaults they keep)."""

    token_provider: TokenProvider | None
    concurrency: int
    timeout: float
    env: Mapping[str, str] | None
    client: httpx.AsyncClient | None
    quota_project: str | None
    adc: bool


class SessionCloud:
    """The part of a cloud over one ``GoogleSession`` that is not its API's
    (``adapters/rest.RestCloud``, ``adapters/compute.ComputeCloud``). ``aclose`` it."""

    def __init__(
        self,
        project: str,
        endpoint: str,
        *,
        title: str,
        classifier: Classifier = _default_classifier,
        **options: Unpack[SessionOptions],
    ) -> None:
        self._http = GoogleSession(project, endpoint, title=title, classifier=classifier, **options)
        self.project = self._http.project
        self.endpoint = self._http.endpoint

    def __repr__(self) -> str:
        return f"{type(self).__name__}(project={self.project!r}, endpoint={self.endpoint!r})"

    @property
    def requests_sent(self) -> int:
        """HTTP requests so far (the metrics' requests per poll)."""
        return self._http.requests_sent

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def quota_choice(self) -> QuotaChoice:
        """The ``X-Goog-User-Project`` sent and why (complete once a token was fetched)."""
        return self._http.quota_choice()

    def quota_note(self) -> str:
        return self._http.quota_note()


# --- pure helpers (no I/O) -----------------------------------------------------------------


async def both(first: Awaitable[T], second: Awaitable[U]) -> tuple[T, U]:
    """Run both; when one fails, cancel the other and raise the failure."""
    tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
    try:
        a, b = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return a, b


def endpoint_from(
    endpoint: str | None, env: Mapping[str, str] | None, variable: str, default: str
) -> str:
    """A cloud's endpoint: ``endpoint``, else gcloud's override ``variable`` in ``env`` (the
    process's environment when None), else the API's ``default``."""
    return endpoint or (os.environ if env is None else env).get(variable) or default


def check_endpoint(endpoint: str, title: str = "the TPU API") -> str:
    """An http(s) base URL ending in ``/``. Plain http only to loopback: tokens travel on it."""
    try:
        url = httpx.URL(endpoint)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host or url.query:
        what = title.removeprefix("the ")
        raise PermanentCloudError(
            f"invalid {what} endpoint {endpoint!r}: expected https://host/",
            status="INVALID_ARGUMENT",
        )
    if url.scheme == "http" and not is_loopback(url.host):
        raise PermanentCloudError(
            f"refusing plain http to {url.host}: access tokens would travel unencrypted",
            status="INVALID_ARGUMENT",
        )
    text = str(url.copy_with(fragment=None))
    return text if text.endswith("/") else text + "/"


def is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def snippet(response: httpx.Response) -> str:
    text = " ".join(response.content[:200].decode("utf-8", "replace").split())
    kind = response.headers.get("content-type", "no content type")
    return f"not JSON ({kind}): {text!r}"


__all__ = [
    "Classifier",
    "GoogleSession",
    "SessionCloud",
    "SessionOptions",
    "both",
    "check_endpoint",
    "endpoint_from",
    "is_loopback",
    "retry_after",
    "snippet",
]
