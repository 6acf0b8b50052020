"""Creates whose long-running operation fails after the first reply: how many the real
controller sends in a window, permanent and transient.

The production ``Controller`` (REST, in-process, fast poll 1 s) holds one slot against an
emulator (speed 1) whose create operations for it finish 1 s later with an error (the
emulator's ``operation_failures``). Counted at the emulator: creates sent and operations read
in ``--seconds`` (default 30). Before operations were read back, a permanent failure was
resent on every pass (the issue measured 256 creates in 30 s).

    python scripts/bench/operation_failures.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from _common import ensure_repo_on_path

ensure_repo_on_path()

from reconciler.adapters.statedir import StateDir  # noqa: E402
from reconciler.emulator import Emulator  # noqa: E402
from reconciler.runtime.backends import make_cloud  # noqa: E402
from reconciler.runtime.controller import Controller  # noqa: E402
from reconciler.runtime.desired_loader import DesiredLoader  # noqa: E402
from reconciler.runtime.events import EventLog  # noqa: E402

DESIRED = """\
project: test-project
settings: {backend: rest, poll_interval: 5s, fast_poll_interval: 1s}
defaults: {setup: {tmux: false}}
slots:
  - {name: alpha, zone: us-central2-b, accelerator: v4-8, want: held}
"""


async def measure(status: str, seconds: float) -> tuple[int, int, str]:
    with tempfile.TemporaryDirectory() as tmp, Emulator(speed=1.0) as emu:
        root = Path(tmp)
        (root / "token").write_text("bench-token\n")
        env = {**os.environ, "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": emu.url,
               "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(root / "token")}  # fmt: skip
        emu.fail_operations(verb="create", name="alpha", status=status, message="refused", after=1)
        (root / "desired.yaml").write_text(DESIRED)
        state = StateDir(root / "state").ensure()
        controller = Controller(
            store=DesiredLoader(root / "desired.yaml", env),
            state=state,
            cloud_factory=lambda d: make_cloud(d, env),
            events=EventLog(state),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop, watch=False))
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.wait_for(task, timeout=30)
        counts = emu.request_counts()
        error = controller.memory.error("us-central2-b/alpha:cloud")
        shown = error.message if error else "-"
        return counts["POST queuedResources.create"], counts["GET operations.get"], shown


async def run(seconds: float) -> None:
    print(f"machine: {os.uname().nodename} {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print(f"command: python scripts/bench/operation_failures.py {' '.join(sys.argv[1:])}")
    for status in ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"):
        creates, reads, shown = await measure(status, seconds)
        print(f"{status:>18}: {creates} creates, {reads} operation reads in {seconds:.0f} s; "
              f"last_error: {shown}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    asyncio.run(run(parser.parse_args().seconds))


if __name__ == "__main__":
    main()
