"""50 concurrent edits from MCP servers and CLI processes, while another process keeps saving
desired.yaml the way editors do (temp file + rename, adding its own comment lines, without the
intent lock): nothing is lost and the file parses at every moment."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reconciler.adapters.files import read_jsonl
from reconciler.errors import InvalidDesiredState
from reconciler.model.load import parse_desired
from tests.support.cli import CLI_ARGV
from tests.unit.test_intent import SAMPLE, comments

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MCP_SERVERS, MCP_CALLS, CLI_PROCS = 2, 10, 30

# An editor that saves with a temp file and a rename and does not take the intent lock. It saves
# the careful way, like the intent engine: check the file is unchanged since it was read, swap
# its text in with an exchange that hands back what it replaced, and if someone saved in between,
# swap that straight back and start again. (A careless editor that overwrites a file changed on
# disk loses other people's changes whatever they do; that is not what this test is about.)
EDITOR = """
import hashlib, sys, time
from pathlib import Path
from reconciler.intent.engine import swap_in
path, stop, log = map(Path, sys.argv[1:4])
sha = lambda b: hashlib.sha256(b).hexdigest()
n = 0
while not stop.exists() and n < 20:
    n += 1
    note = f"# editor note {n}\\n".encode()
    while True:
        base = path.read_bytes()
        lines = base.splitlines(keepends=True)
        new = b"".join(lines[:1] + [note] + lines[1:]) if n % 2 else base + note
        if path.read_bytes() != base:
            continue
        if swap_in(path, new, sha(base)):
            break
    with log.open("a") as f:
        f.write(f"{n}\\n")
    time.sleep(0.2)
"""


async def mcp_edits(tmp: Path, k: int) -> list[dict[str, Any]]:
    args = ["-m", "reconciler.surfaces.mcp_server", "--file", str(tmp / "desired.yaml"),
            "--state-dir", str(tmp / "state")]  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO))
    with (tmp / f"server{k}.err").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            calls = [
                {"zone": "us-central2-b", "accelerator": "v4-8", "name": f"mcp-{k}-{i}",
                 "operation_id": f"op-{k}-{i}"}
                for i in range(MCP_CALLS)
            ]  # fmt: skip
            results = await asyncio.gather(*(s.call_tool("add_slot", c) for c in calls))
    assert all(not r.is_error for r in results), [r.content for r in results if r.is_error]
    return [r.structured_content for r in results]


async def cli_edit(tmp: Path, i: int) -> tuple[int, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *CLI_ARGV, "--file", str(tmp / "desired.yaml"),
        "--state-dir", str(tmp / "state"), "-q",
        "add-slot", "--zone", "us-central2-b", "--accelerator", "v4-8", "--name", f"cli-{i}",
        cwd=str(REPO), stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    return proc.returncode or 0, err


def watch(file: Path, stop: threading.Event, seen: dict[str, Any]) -> None:
    """Read and validate the file over and over; every read must parse. A read of the same
    text as the last one is the same parse (it is deterministic): counted, not parsed again,
    so the watcher does not take a core from the edits it watches."""
    last: str | None = None
    while not stop.is_set():
        text = file.read_text()
        if text != last:
            try:
                parse_desired(text)
            except InvalidDesiredState as e:
                seen["bad"].append((str(e), text))
            last = text
        seen["reads"] += 1
        stop.wait(0.005)


async def test_concurrent_edits_and_editor_saves_lose_nothing(tmp_path: Path) -> None:
    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE)
    stop_file, log = tmp_path / "stop-editor", tmp_path / "editor.log"
    editor = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EDITOR, str(file), str(stop_file), str(log), cwd=str(REPO)
    )
    stop, seen = threading.Event(), {"bad": [], "reads": 0}
    watcher = threading.Thread(target=watch, args=(file, stop, seen))
    watcher.start()
    try:
        outcome = await asyncio.gather(
            *(mcp_edits(tmp_path, k) for k in range(MCP_SERVERS)),
            *(cli_edit(tmp_path, i) for i in range(CLI_PROCS)),
        )
    finally:
        stop_file.touch()
        await editor.wait()
        stop.set()
        watcher.join()
    for code, err in outcome[MCP_SERVERS:]:
        assert code == 0, err.decode()
    assert all(r["status"] == "changed" for rs in outcome[:MCP_SERVERS] for r in rs)

    final = file.read_text()
    desired = parse_desired(final)
    wanted = [f"mcp-{k}-{i}" for k in range(MCP_SERVERS) for i in range(MCP_CALLS)]
    wanted += [f"cli-{i}" for i in range(CLI_PROCS)]
    assert [n for n in wanted if desired.slot(n) is None] == []
    notes = log.read_text().split()
    assert len(notes) >= 3, "the editor should have saved several times during the edits"
    assert [n for n in notes if f"# editor note {n}\n" not in final] == []
    assert [c for c in comments(SAMPLE) if c not in comments(final)] == []
    assert seen["bad"] == [] and seen["reads"] > 50
    audited = [
        r for r in read_jsonl(tmp_path / "state" / "audit.jsonl") if r["status"] == "changed"
    ]
    assert len(audited) == len(wanted)
