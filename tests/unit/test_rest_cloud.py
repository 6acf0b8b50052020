"""RestCloud's paging, parsing and failure handling against httpx.MockTransport.

Only the logic that needs no server lives here; the behaviour against a real HTTP server (the
emulator) is in tests/integration/test_rest_contract.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest

from reconciler.adapters.auth import QuotaHint
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import QUOTA_DELAY
from reconciler.adapters.rest import RestCloud
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.errors import PermanentCloudError, TransientCloudError, UnsafeName
from reconciler.model.requests import CreateRequest

SECRET = "ya29.secret-token-value"
BASE = "/v2/projects/proj-123/locations/"

Handler = Callable[[httpx.Request], httpx.Response]
AsyncHandler = Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]


class Tokens:
    def __init__(self, *tokens: str, quota: QuotaHint | None = None) -> None:
        self.tokens = list(tokens) or [SECRET]
        self.invalidated = 0
        self.quota = quota or QuotaHint()

    async def token(self) -> str:
        return self.tokens[0]

    def invalidate(self) -> None:
        self.invalidated += 1
        if len(self.tokens) > 1:
            self.tokens.pop(0)


def cloud_with(
    handler: Handler | AsyncHandler, tokens: Tokens | None = None, **kw: Any
) -> RestCloud:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return RestCloud(
        "proj-123",
        endpoint="https://tpu.example.test/",
        token_provider=tokens or Tokens(),
        client=client,
        env={},
        **kw,
    )


def qr(zone: str, name: str, state: str = "ACTIVE") -> dict[str, Any]:
    return {
        "name": f"projects/proj-123/locations/{zone}/queuedResources/{name}",
        "state": {"state": state},
        "tpu": {"nodeSpec": [{"nodeId": name, "node": {"acceleratorType": "v4-8"}}]},
    }


def node(zone: str, name: str) -> dict[str, Any]:
    return {
        "name": f"projects/proj-123/locations/{zone}/nodes/{name}",
        "state": "READY",
        "networkEndpoints": [{"ipAddress": "10.0.0.2"}],
    }


def paged(key: str, items: list[dict[str, Any]], size: int, **extra: Any) -> Handler:
    """A list endpoint answering ``size`` items per page."""

    def answer(request: httpx.Request) -> httpx.Response:
        start = int(request.url.params.get("pageToken") or 0)
        page: dict[str, Any] = {key: items[start : start + size], **extra}
        if start + size < len(items):
            page["nextPageToken"] = str(start + size)
        return httpx.Response(200, json=page)

    return answer


def api(
    qrs: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    *,
    size: int = 3,
    log: list[httpx.Request] | None = None,
    qr_extra: dict[str, Any] | None = None,
) -> Handler:
    list_qrs = paged("queuedResources", qrs or [], size, **(qr_extra or {}))
    list_nodes = paged("nodes", nodes or [], size)

    def handler(request: httpx.Request) -> httpx.Response:
        if log is not None:
            log.append(request)
        if request.url.path == BASE + "-/queuedResources":
            return list_qrs(request)
        if request.url.path == BASE + "-/nodes":
            return list_nodes(request)
        return httpx.Response(404, json={"error": {"code": 404, "status": "NOT_FOUND"}})

    return handler


def error(code: int, status: str, message: str = "no", **headers: str) -> httpx.Response:
    body = {"error": {"code": code, "message": message, "status": status}}
    return httpx.Response(code, json=body, headers=headers)


# --- observe ---------------------------------------------------------------------------------


async def test_observe_follows_pages_with_one_list_chain_each() -> None:
    qrs = [qr(z, f"q{i}") for i, z in enumerate(["us-central2-b", "europe-west4-a"] * 5)]
    nodes = [node("us-central2-b", f"q{i}") for i in range(0, 10, 2)]
    log: list[httpx.Request] = []
    cloud = cloud_with(api(qrs, nodes, size=3, log=log))
    seen = await cloud.observe(None)
    assert len(seen.requests) == 10 and len(seen.nodes) == 5
    assert seen.zones is None and seen.unreachable == frozenset()
    paths = [r.url.path for r in log]
    assert paths.count(BASE + "-/queuedResources") == 4  # ceil(10 / 3) pages
    assert paths.count(BASE + "-/nodes") == 2
    assert set(paths) == {BASE + "-/queuedResources", BASE + "-/nodes"}
    assert all(r.method == "GET" for r in log)
    assert seen.request("europe-west4-a", "q1") is not None


async def test_observe_leaves_out_v1_api_nodes_as_gcloud_does() -> None:
    old = {**node("us-central2-b", "legacy"), "apiVersion": "V1"}
    new = {**node("us-central2-b", "a"), "apiVersion": "V2"}
    cloud = cloud_with(api([qr("us-central2-b", "a")], [old, new, node("us-central2-b", "b")]))
    seen = await cloud.observe(None)
    assert sorted(n.name for n in seen.nodes) == ["a", "b"]


async def test_observe_filters_to_the_zones_asked() -> None:
    qrs = [qr("us-central2-b", "a"), qr("europe-west4-a", "b")]
    cloud = cloud_with(api(qrs, [node("europe-west4-a", "b")]))
    seen = await cloud.observe(["europe-west4-a"])
    assert [q.name for q in seen.requests] == ["b"]
    assert [n.name for n in seen.nodes] == ["b"]
    assert seen.zones == frozenset({"europe-west4-a"})
    assert not seen.knows("us-central2-b")


async def test_unreachable_zones_are_unknown_not_empty() -> None:
    gone = ["projects/proj-123/locations/us-east1-d", "europe-west4-a"]
    cloud = cloud_with(api([qr("us-central2-b", "a")], qr_extra={"unreachable": gone}))
    seen = await cloud.observe(None)
    assert seen.unreachable == frozenset({"us-east1-d", "europe-west4-a"})
    assert not seen.knows("us-east1-d") and seen.knows("us-central2-b")
    only = await cloud.observe(["us-central2-b", "us-east1-d"])
    assert only.unreachable == frozenset({"us-east1-d"})


async def test_an_unreachable_region_voids_the_observation() -> None:
    cloud = cloud_with(api([], qr_extra={"unreachable": ["projects/p/locations/us-east1"]}))
    with pytest.raises(TransientCloudError, match="not a zone"):
        await cloud.observe(None)


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html><body>Service temporarily busy</body></html>"),
        httpx.Response(200, text='{"queuedResources": [1'),
        httpx.Response(200, json=["not", "an", "object"]),
        httpx.Response(200, json={"queuedResources": {"a": 1}}),
        httpx.Response(200, json={"queuedResources": [{"state": {"state": "ACTIVE"}}]}),
        httpx.Response(200, json={"queuedResources": [{"name": "no-location"}]}),
        httpx.Response(200, json={"queuedResources": [], "unreachable": "us-east1-d"}),
        httpx.Response(200, json={"queuedResources": [], "unreachable": [3]}),
        httpx.Response(200, json={"queuedResources": [], "nextPageToken": 7}),
        httpx.Response(200, json={"queuedResources": [{"name": "x", "state": "ACTIVE"}]}),
        httpx.Response(502, text="<html>Bad Gateway</html>"),
        httpx.Response(200, json={"queuedResources": [{**qr("us-central2-b", "a"), "tpu": [1]}]}),
        httpx.Response(
            200,
            json={
                "queuedResources": [],
                "nodes": [{**node("us-central2-b", "a"), "networkEndpoints": 5}],
            },
        ),
    ],
)
async def test_malformed_pages_are_transient_never_partial(response: httpx.Response) -> None:
    """Both lists get the same page; the other list's key is absent there (an empty list)."""
    with pytest.raises(TransientCloudError) as caught:
        await cloud_with(lambda request: response).observe(None)
    assert SECRET not in str(caught.value)


async def test_a_page_token_that_repeats_is_not_followed_forever() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"nodes": [], "queuedResources": [], "nextPageToken": "t"})

    with pytest.raises(TransientCloudError, match="repeats"):
        await cloud_with(handler).observe(None)


async def test_one_failed_list_fails_the_observation_and_stops_the_other() -> None:
    node_list_started = asyncio.Event()
    node_list_cancelled = asyncio.Event()

    async def slow_nodes() -> httpx.Response:
        node_list_started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            node_list_cancelled.set()
            raise
        return httpx.Response(200, json={})

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/nodes"):
            return await slow_nodes()
        await node_list_started.wait()
        return error(403, "PERMISSION_DENIED", "caller lacks tpu.queuedResources.list")

    cloud = cloud_with(handler)
    with pytest.raises(PermanentCloudError, match="PERMISSION_DENIED"):
        await cloud.observe(None)
    assert node_list_cancelled.is_set()


async def test_empty_lists_omit_their_keys_and_that_is_fine() -> None:
    cloud = cloud_with(lambda request: httpx.Response(200, json={}))
    seen = await cloud.observe(["us-central2-b"])
    assert seen.requests == () and seen.nodes == ()
    assert seen.knows("us-central2-b")


async def test_bad_zone_names_are_refused_before_any_request() -> None:
    log: list[httpx.Request] = []
    cloud = cloud_with(api(log=log))
    with pytest.raises(UnsafeName):
        await cloud.observe(["us-central2-b/../../x"])
    with pytest.raises(UnsafeName):
        await cloud.delete_request("tpu", "us-central2-b", "../x", force=True)
    assert log == []


# --- auth ------------------------------------------------------------------------------------


async def test_the_token_is_sent_as_a_bearer_header() -> None:
    log: list[httpx.Request] = []
    await cloud_with(api(log=log)).observe(None)
    assert {r.headers["authorization"] for r in log} == {f"Bearer {SECRET}"}


async def test_401_refreshes_the_token_once_and_retries_once() -> None:
    tokens = Tokens("old-token", "new-token")
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        if request.headers["authorization"] == "Bearer old-token":
            return error(401, "UNAUTHENTICATED", "expired")
        return httpx.Response(200, json=qr("us-central2-b", "a"))

    found = await cloud_with(handler, tokens).describe_request("tpu", "us-central2-b", "a")
    assert found is not None and found.api_state == QRState.ACTIVE
    assert seen == ["Bearer old-token", "Bearer new-token"]
    assert tokens.invalidated == 1


async def test_a_second_401_is_not_retried_again() -> None:
    tokens = Tokens()
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")

    with pytest.raises(TransientCloudError) as caught:
        await cloud_with(handler, tokens).describe_request("tpu", "us-central2-b", "a")
    assert caught.value.status == "UNAUTHENTICATED"
    assert len(calls) == 2 and tokens.invalidated == 1
    assert SECRET not in str(caught.value)


async def test_many_401s_at_once_refresh_the_token_once() -> None:
    tokens = Tokens("old-token", "new-token")

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.01)
        if request.headers["authorization"] == "Bearer old-token":
            return error(401, "UNAUTHENTICATED")
        return httpx.Response(200, json=qr("us-central2-b", "a"))

    cloud = cloud_with(slow, tokens)
    found = await asyncio.gather(
        *(cloud.describe_request("tpu", "us-central2-b", "a") for _ in range(6))
    )
    assert all(f is not None for f in found)
    assert tokens.invalidated == 1


async def test_concurrency_is_bounded() -> None:
    in_flight = peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json=qr("us-central2-b", "a"))

    cloud = cloud_with(handler, concurrency=2)
    await asyncio.gather(*(cloud.describe_request("tpu", "us-central2-b", "a") for _ in range(7)))
    assert peak == 2


def test_repr_shows_no_token() -> None:
    cloud = cloud_with(api())
    assert SECRET not in repr(cloud) and "proj-123" in repr(cloud)


# --- create / delete / describe --------------------------------------------------------------

REQUEST = CreateRequest(
    name="spot-v4-8-a",
    zone="us-central2-b",
    accelerator="v4-8",
    image="x",
    mode="spot",
)


async def test_create_posts_the_body_and_does_not_wait_for_the_operation() -> None:
    log: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        return httpx.Response(200, json={"name": "projects/p/locations/z/operations/1"})

    assert (await cloud_with(handler).create_request(REQUEST)).outcome is Outcome.DONE
    (sent,) = log
    assert sent.method == "POST"
    assert sent.url.path == BASE + "us-central2-b/queuedResources"
    assert dict(sent.url.params) == {"queuedResourceId": "spot-v4-8-a"}
    body = json.loads(sent.content)
    assert body["spot"] == {}
    assert body["tpu"]["nodeSpec"][0]["nodeId"] == "spot-v4-8-a"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (error(409, "ALREADY_EXISTS", "already exists"), Outcome.ALREADY),
        (
            httpx.Response(200, json={"done": True, "error": {"code": 6, "message": "exists"}}),
            Outcome.ALREADY,
        ),
        (httpx.Response(200, json={"done": True, "response": {}}), Outcome.DONE),
        (httpx.Response(200, json={"done": False}), Outcome.DONE),
    ],
)
async def test_create_outcomes(response: httpx.Response, expected: Outcome) -> None:
    assert (await cloud_with(lambda r: response).create_request(REQUEST)).outcome is expected


@pytest.mark.parametrize(
    ("response", "kind", "status", "delay"),
    [
        (
            error(429, "RESOURCE_EXHAUSTED", "rate", **{"Retry-After": "300"}),
            TransientCloudError,
            "RESOURCE_EXHAUSTED",
            300.0,
        ),
        (
            error(429, "RESOURCE_EXHAUSTED", "rate"),
            TransientCloudError,
            "RESOURCE_EXHAUSTED",
            QUOTA_DELAY,
        ),
        (error(503, "UNAVAILABLE"), TransientCloudError, "UNAVAILABLE", None),
        (httpx.Response(503, text="<html>down</html>"), TransientCloudError, "UNAVAILABLE", None),
        (error(403, "PERMISSION_DENIED"), PermanentCloudError, "PERMISSION_DENIED", None),
        (error(400, "INVALID_ARGUMENT"), PermanentCloudError, "INVALID_ARGUMENT", None),
        (
            httpx.Response(
                200, json={"done": True, "error": {"code": 8, "message": "no capacity"}}
            ),
            TransientCloudError,
            "RESOURCE_EXHAUSTED",
            QUOTA_DELAY,
        ),
        (
            httpx.Response(
                200,
                json={
                    "done": True,
                    "error": {"code": 7, "message": "No permission to submit into this queue"},
                },
            ),
            PermanentCloudError,
            "PERMISSION_DENIED",
            None,
        ),
        (httpx.Response(200, text="OK"), TransientCloudError, None, None),
    ],
)
async def test_create_failures_are_classified(
    response: httpx.Response, kind: type[Exception], status: str | None, delay: float | None
) -> None:
    with pytest.raises(kind) as caught:
        await cloud_with(lambda r: response).create_request(REQUEST)
    assert getattr(caught.value, "status", None) == status
    if delay is not None:
        assert isinstance(caught.value, TransientCloudError) and caught.value.delay == delay


async def test_delete_sends_force_only_when_asked() -> None:
    log: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        return httpx.Response(200, json={"name": "op"})

    cloud = cloud_with(handler)
    assert (
        await cloud.delete_request("tpu", "us-central2-b", "a", force=True)
    ).outcome is Outcome.DONE
    assert (
        await cloud.delete_request("tpu", "us-central2-b", "a", force=False)
    ).outcome is Outcome.DONE
    assert [(r.method, r.url.path, dict(r.url.params)) for r in log] == [
        ("DELETE", BASE + "us-central2-b/queuedResources/a", {"force": "true"}),
        ("DELETE", BASE + "us-central2-b/queuedResources/a", {}),
    ]


async def test_delete_of_a_missing_qr_is_already_done() -> None:
    cloud = cloud_with(lambda r: error(404, "NOT_FOUND", "not found"))
    assert (
        await cloud.delete_request("tpu", "us-central2-b", "a", force=True)
    ).outcome is Outcome.ALREADY
    assert await cloud.describe_request("tpu", "us-central2-b", "a") is None


async def test_delete_that_must_wait_is_transient() -> None:
    cloud = cloud_with(lambda r: error(400, "FAILED_PRECONDITION", "node exists; use force"))
    with pytest.raises(TransientCloudError):
        await cloud.delete_request("tpu", "us-central2-b", "a", force=False)


@pytest.mark.parametrize(
    "exc",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("x")],
)
async def test_transport_failures_are_transient(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(TransientCloudError) as caught:
        await cloud_with(handler).observe(None)
    assert SECRET not in str(caught.value)


async def test_guest_attributes_post_the_query_path() -> None:
    log: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        items = [{"namespace": "lifecycle", "key": "event", "value": "ok"}]
        return httpx.Response(200, json={"guestAttributes": [{"queryValue": {"items": items}}]})

    rows = await cloud_with(handler).guest_attributes("us-central2-b", "a", "lifecycle/")
    assert rows == [{"worker_id": 0, "namespace": "lifecycle", "key": "event", "value": "ok"}]
    (sent,) = log
    assert (sent.method, sent.url.path) == (
        "POST",
        BASE + "us-central2-b/nodes/a:getGuestAttributes",
    )
    assert json.loads(sent.content) == {"queryPath": "lifecycle/"}
    with pytest.raises(UnsafeName):
        await cloud_with(handler).guest_attributes("us-central2-b", "a", "../x?y")


@pytest.mark.parametrize(("level", "lines"), [(logging.INFO, 0), (logging.DEBUG, 1)])
async def test_per_request_http_logging_only_with_verbose(
    caplog: pytest.LogCaptureFixture, level: int, lines: int
) -> None:
    caplog.set_level(level)  # the root level: what -q / default / -v set
    cloud = cloud_with(lambda r: httpx.Response(404, json={"error": {"code": 404}}))
    assert await cloud.describe_request("tpu", "us-central2-b", "a") is None
    assert len([r for r in caplog.records if r.name == "httpx"]) == lines
