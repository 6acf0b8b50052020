"""ntfy notices against a real local HTTP server (stdlib http.server in a thread)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from reconciler.adapters.notify import send
from reconciler.errors import PermanentError, TemporaryError, UnsafeName
from tests.support.http_stub import Quiet, serving

pytestmark = pytest.mark.integration

TOPIC = "tpu-7d38381b2a8dff9c4e1a"


@dataclass
class FakeNtfy:
    """A tiny ntfy: records each POST and answers with the next scripted status (then 200)."""

    url: str = ""
    statuses: list[int] = field(default_factory=list)
    headers: dict[int, dict[str, str]] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def ntfy() -> Iterator[FakeNtfy]:
    state = FakeNtfy()
    lock = threading.Lock()

    class Handler(Quiet):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                index = len(state.received)
                state.received.append(
                    {
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type"),
                        "body": json.loads(body),
                    }
                )
                status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            for k, v in state.headers.get(index, {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

    with serving(Handler) as port:
        state.url = f"http://127.0.0.1:{port}"
        yield state


class Sleeps:
    """Fake time for the retry waits: records them instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_notice_arrives_with_title_message_tags_and_priority(ntfy: FakeNtfy) -> None:
    async with httpx.AsyncClient() as client:
        await send(
            client,
            ntfy.url,
            TOPIC,
            title="TPU ACTIVE: spot-v4-8-usc2b-1",
            message="spot-v4-8-usc2b-1 is ACTIVE in us-central2-b ✓",
            tags=["rocket", "tpu"],
            priority=4,
        )
    assert len(ntfy.received) == 1
    got = ntfy.received[0]
    assert got["path"] == "/" and got["content_type"] == "application/json"
    assert got["body"] == {
        "topic": TOPIC,
        "title": "TPU ACTIVE: spot-v4-8-usc2b-1",
        "message": "spot-v4-8-usc2b-1 is ACTIVE in us-central2-b ✓",
        "tags": ["rocket", "tpu"],
        "priority": 4,
    }


async def test_transient_server_errors_are_retried_with_backoff(ntfy: FakeNtfy) -> None:
    ntfy.statuses = [503, 502, 429]
    ntfy.headers = {2: {"Retry-After": "7"}}
    sleeps = Sleeps()
    async with httpx.AsyncClient() as client:
        await send(client, ntfy.url, TOPIC, title="t", message="m", backoff=1.5, sleep=sleeps)
    assert len(ntfy.received) == 4
    assert sleeps.waits == [1.5, 3.0, 7.0]  # exponential, then the server's Retry-After


async def test_gives_up_with_a_temporary_error_after_the_retries(ntfy: FakeNtfy) -> None:
    ntfy.statuses = [500] * 10
    sleeps = Sleeps()
    async with httpx.AsyncClient() as client:
        with pytest.raises(TemporaryError, match="HTTP 500"):
            await send(client, ntfy.url, TOPIC, title="t", message="m", retries=2, sleep=sleeps)
    assert len(ntfy.received) == 3 and len(sleeps.waits) == 2


async def test_a_refusal_is_permanent_and_not_retried(ntfy: FakeNtfy) -> None:
    ntfy.statuses = [403]
    async with httpx.AsyncClient() as client:
        with pytest.raises(PermanentError, match="403"):
            await send(client, ntfy.url, TOPIC, title="t", message="m", sleep=Sleeps())
    assert len(ntfy.received) == 1


async def test_an_unreachable_server_is_a_temporary_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    sleeps = Sleeps()
    async with httpx.AsyncClient() as client:
        with pytest.raises(TemporaryError, match="ConnectError"):
            await send(
                client, f"http://127.0.0.1:{port}", TOPIC, title="t", message="m", sleep=sleeps
            )
    assert len(sleeps.waits) == 3


async def test_empty_topic_sends_nothing(ntfy: FakeNtfy) -> None:
    async with httpx.AsyncClient() as client:
        await send(client, ntfy.url, "", title="t", message="m")
    assert ntfy.received == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"topic": "tpu/../admin"},
        {"topic": "a b"},
        {"tags": ["ok", "two words"]},
        {"priority": 9},
        {"server": "file:///etc/passwd"},
    ],
)
async def test_invalid_input_is_refused_before_anything_is_sent(
    ntfy: FakeNtfy, kwargs: dict[str, Any]
) -> None:
    args: dict[str, Any] = {"server": ntfy.url, "topic": TOPIC, "title": "t", "message": "m"}
    args.update(kwargs)
    async with httpx.AsyncClient() as client:
        with pytest.raises((UnsafeName, PermanentError)):
            await send(client, args.pop("server"), args.pop("topic"), **args)
    assert ntfy.received == []
