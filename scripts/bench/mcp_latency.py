"""MCP latency through the SDK's own stdio client against a real ``tpu-mcp`` process.

Measures: server start to first answer (spawn, initialize, first status), the median of
100 ``status`` calls (``list_slots`` before; the result keeps its key), and the median of 100
edits (``hold`` alternating with ``tmux_open`` / ``setup`` flags so every call writes).
Targets: 1.5 s, 50 ms, 100 ms.

    python scripts/bench/mcp_latency.py [--calls 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
DESIRED = """\
# benchmark intent
project: bench-project-1
slots:
""" + "".join(
    f"  - name: spot-v4-8-usc2b-{i}   # slot {i}\n"
    "    zone: us-central2-b\n    accelerator: v4-8\n    want: released\n"
    for i in range(1, 21)
)


async def run(calls: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    (tmp / "desired.yaml").write_text(DESIRED)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "reconciler.surfaces.mcp_server",
            "--file",
            str(tmp / "desired.yaml"),
            "--state-dir",
            str(tmp / "state"),
        ],
        cwd=str(REPO),
    )
    with (tmp / "server.err").open("w") as errlog:
        start = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("status", {})
            first = time.perf_counter() - start
            reads = []
            for _ in range(calls):
                t = time.perf_counter()
                await s.call_tool("status", {})
                reads.append(time.perf_counter() - t)
            edits = []
            for i in range(calls):
                args = {"name": f"spot-v4-8-usc2b-{i % 20 + 1}", "operation_id": f"bench-{i}"}
                t = time.perf_counter()
                res = await s.call_tool("tmux_open" if i // 20 % 2 else "hold", args)
                edits.append(time.perf_counter() - t)
                assert not res.is_error, res.content
    return {
        "start_to_first_answer_s": first,
        "list_slots_median_ms": statistics.median(reads) * 1000,
        "edit_median_ms": statistics.median(edits) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    result = anyio.run(run, args.calls)
    targets = {"start_to_first_answer_s": 1.5, "list_slots_median_ms": 50, "edit_median_ms": 100}
    ok = True
    for key, value in result.items():
        good = value <= targets[key]
        ok &= good
        print(f"{key:26} {value:8.3f}  (target <= {targets[key]})  {'ok' if good else 'SLOW'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
