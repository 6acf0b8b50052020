"""What the MCP server cannot serve is said, never swallowed: a misspelled tool or argument is
refused by name with a did-you-mean (and changes nothing), a missing or wrong argument is one
line without pydantic's text or URL, and a line that is no JSON-RPC message — garbage, binary,
``params`` a string — is answered with the JSON-RPC error instead of leaving the client waiting.

Through the SDK's own client, and by writing raw bytes to the server's stdin.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_mcp_server import REPO, call, refused, session
from tests.unit.test_intent import SAMPLE

pytestmark = pytest.mark.integration


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "desired.yaml").write_text(SAMPLE)
    return tmp_path


async def test_arguments_are_checked_by_name_and_said_in_one_line(tmp: Path) -> None:
    before = (tmp / "desired.yaml").read_text()
    async with session(tmp) as s:
        typo = await refused(s, "queue_slot", name="small", operaton_id="op-1")
        assert typo.startswith("queue_slot: unknown argument 'operaton_id' (did you mean "
                               "'operation_id'?); it takes name, operation_id")  # fmt: skip
        assert (tmp / "desired.yaml").read_text() == before  # refused: nothing was edited
        missing = await refused(s, "queue_slot", wait_seconds=0)
        assert missing.startswith("queue_slot: missing required argument 'name'")
        wrong = await refused(s, "queue_slot", name="small", wait_seconds="soon")
        assert wrong == "queue_slot: wait_seconds must be a number; got 'soon'"
        for text in (typo, missing, wrong):
            assert "\n" not in text and "http" not in text and "validation error" not in text
        assert await refused(s, "queue_slto", name="x") == (
            "unknown tool 'queue_slto' (did you mean 'queue_slot'?)"
        )
        done = await call(s, "queue_slot", name="small", operation_id="op-1")
        assert done["operation_id"] == "op-1"  # spelled right, it is taken


def _initialize() -> bytes:
    hello = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    }  # fmt: skip
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    return (json.dumps(hello) + "\n" + json.dumps(initialized) + "\n").encode()


def _replies(proc: subprocess.Popen[bytes], count: int, timeout: float = 20.0) -> list[Any]:
    assert proc.stdout is not None
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"no answer after {out}"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            line = proc.stdout.readline()
            assert line, f"the server closed stdout after {out}"
            out.append(json.loads(line))
    return out


def test_malformed_json_rpc_gets_the_json_rpc_error(tmp: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.surfaces.mcp_server",
         "--file", str(tmp / "desired.yaml"), "--state-dir", str(tmp / "state")],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None
    try:
        proc.stdin.write(_initialize())
        proc.stdin.flush()
        assert _replies(proc, 1)[0]["id"] == 1
        lines = [
            b"this is not json\n",
            b"\xff\xfe\x00\x01\x80binary\n",
            b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "x"}\n',
            b"[1, 2]\n",
            b'{"jsonrpc": "2.0", "id": "q", "params": {}}\n',
            b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}\n',  # still serving
        ]
        proc.stdin.write(b"".join(lines))
        proc.stdin.flush()
        replies = _replies(proc, len(lines))
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
    errors = [(r["id"], r["error"]["code"]) for r in replies[:-1]]
    assert errors == [(None, -32700), (None, -32700), (7, -32602), (None, -32600), ("q", -32600)]
    assert replies[2]["error"]["message"] == "Invalid params: params must be an object"
    assert replies[-1]["id"] == 8 and "tools" in replies[-1]["result"]
    assert proc.returncode == 0
