"""``tpu-reconciler demo``: the whole product in about a minute, on the built-in emulator.

It starts the emulator, writes a temporary desired file, runs the real controller against it
with a fast clock, and tells a story: a slot is held, a race across two zones is won and the
loser cancelled, a TPU7x slice of two hosts is held through Compute Engine (a BULK MIG with a
workload policy), a preempted TPU is re-queued, and a half-written edit is refused without a
single create or delete. Then a summary. ``--keep`` leaves everything running and prints the
environment to point ``status`` and gcloud at it; Ctrl-C then stops it and removes its files.

The controller is built as ``run`` builds it (``runtime.assemble``), capacity history included,
so ``history``, ``recommend`` and the TUI show what it saw. Everything lives in a temporary
directory: the demo sets its own ``CLOUDSDK_CONFIG``, token file and every endpoint override
gcloud needs (``Emulator.gcloud_env``: Cloud TPU, Compute Engine and OS Login to the
emulator, no metadata
server), so neither it nor a verb run with its printed environment touches the user's gcloud
configuration, a real project or the network.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.errors import DemoFailed
from reconciler.exitcodes import EX_INTERRUPTED, EX_OK, EX_REFUSED

DEMO_PROJECT = "demo-project"
HELD = "spot-v4-8-usc2b-1"
RACE = "any-v6e-8"
WINNER = "spot-v6e8-use1d-1"
LOSER = "spot-v6e8-ew4a-1"
TPU7X = "spot-tpu7x-16-usc1c-1"

DESIRED = f"""\
# A temporary desired file written by `tpu-reconciler demo` (see desired.yaml.example for
# every field). The emulator has capacity for v6e-8 in us-east1-d only, so the race below is
# won there and the europe-west4-a candidate is cancelled. TPU7x is offered only through
# Compute Engine, so its slot is held there (api: compute, the default for tpu7x).
project: {DEMO_PROJECT}
settings:
  backend: {{backend}}
  poll_interval: 2s
  fast_poll_interval: 0.3s
defaults:
  mode: spot
  setup: {{{{bootstrap: false, tailscale: false, tmux: false}}}}
slots:
  - name: {HELD}          # one v4-8, held whatever happens
    zone: us-central2-b
    accelerator: v4-8
    want: held
  - name: {LOSER}
    zone: europe-west4-a
    accelerator: v6e-8
  - name: {WINNER}
    zone: us-east1-d
    accelerator: v6e-8
  - name: {TPU7X}  # 2x2x2: two tpu7x-standard-4t hosts, one BULK MIG
    zone: us-central1-c
    accelerator: tpu7x-16
    want: held
race_groups:
  - name: {RACE}          # queue both; the first to reach PROVISIONING wins
    count: 1
    slots: [{LOSER}, {WINNER}]
"""


class _Story:
    def __init__(self, out: Callable[[str], None], emulator: Any, controller: Any) -> None:
        self.out, self.emu, self.controller = out, emulator, controller
        self.t0 = time.monotonic()
        self.seen: set[tuple[str, str]] = set()  # (slot, state) the controller has observed
        self.restored = False  # the good file is back (set before it is written)
        self.reloaded = False  # and the controller logged it valid again

    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.t0:5.1f}s] {text}")

    def qr_state(self, zone: str, name: str) -> str | None:
        qr = self.emu.queued_resource(zone, name)
        return None if qr is None else str((qr.get("state") or {}).get("state"))

    async def until(self, what: str, check: Callable[[], bool], timeout: float = 45.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise DemoFailed(f"timed out waiting until {what}")
            await asyncio.sleep(0.1)
        self.say(f"✓ {what}")

    def calls(self, method: str, name: str) -> int:
        """Requests of ``method`` that named the QR ``name`` (create by id, delete by path)."""
        return sum(
            1
            for r in self.emu.requests()
            if r.method == method
            and (r.path.endswith(f"/{name}") or r.query.get("queuedResourceId") == name)
        )

    def mutations(self) -> int:
        return sum(
            1
            for r in self.emu.requests()
            if r.method in ("POST", "DELETE") and not r.path.startswith("/_emulator")
        )


async def _tell(story: _Story, desired_path: Path) -> None:
    say = story.say
    say(f"controller started; holding {HELD} and {TPU7X}, racing {LOSER} against {WINNER}")
    # Seen ACTIVE by the controller, not only by the emulator: the preemption below is then a
    # lifetime in the capacity history, however late a pass comes on a busy machine.
    await story.until(f"{HELD} is ACTIVE", lambda: (HELD, "ACTIVE") in story.seen)
    await story.until(
        f"race {RACE} won by {WINNER} (ACTIVE) and {LOSER} cancelled",
        lambda: (
            (WINNER, "ACTIVE") in story.seen and story.qr_state("europe-west4-a", LOSER) is None
        ),
    )
    await story.until(
        f"{TPU7X} ACTIVE on Compute Engine: a BULK MIG of 2 hosts with a workload policy",
        lambda: (TPU7X, "ACTIVE") in story.seen,
    )
    say(f"the cloud preempts {HELD} …")
    deletes, creates = story.calls("DELETE", HELD), story.calls("POST", HELD)
    story.emu.preempt("us-central2-b", HELD)
    await story.until(
        f"{HELD} seen SUSPENDED (preempted); its QR deleted to re-queue",
        lambda: story.calls("DELETE", HELD) > deletes,
    )
    await story.until(
        f"preemption recovered: {HELD} re-created and ACTIVE again",
        lambda: (
            story.calls("POST", HELD) > creates
            and story.qr_state("us-central2-b", HELD) == "ACTIVE"
        ),
        timeout=60.0,
    )
    text = desired_path.read_text()
    half = text[: text.index(f"  - name: {WINNER}") + 12]  # cut off mid-slot, as a crash would
    say("saving a half-written desired.yaml (an editor crash mid-save) …")
    before = story.mutations()
    desired_path.write_text(half)
    await asyncio.sleep(3.0)  # several fast polls
    errors = story.controller.store.last.errors if story.controller.store.last else ()
    if story.mutations() != before:
        raise DemoFailed("the invalid file caused a create or delete")
    shown = str(errors[0]) if errors else "(no error reported)"
    say(f"✓ invalid edit refused, nothing created or deleted: {shown}")
    story.restored = True
    desired_path.write_text(text)
    await story.until(
        "file restored; the controller is back on the fixed intent", lambda: story.reloaded
    )


def run(args: Any) -> int:
    out = print
    backend = args.backend
    if backend == "gcloud" and shutil.which("gcloud") is None:
        print("tpu-reconciler demo: --backend gcloud needs the gcloud CLI", file=sys.stderr)
        return EX_REFUSED
    from reconciler.runtime.service_env import DEMO_DIR_PREFIX

    work = Path(tempfile.mkdtemp(prefix=DEMO_DIR_PREFIX))  # `service install` knows it
    try:
        return _run_in(args, work, out)
    except KeyboardInterrupt:  # before the controller's own Ctrl-C handling is in place
        out("interrupted")
        return EX_INTERRUPTED
    finally:
        # Everything in it (desired.yaml, the state, the gcloud config) describes this
        # emulator, which ends with this process: nothing is worth keeping.
        shutil.rmtree(work, ignore_errors=True)
        if args.keep:
            out(f"demo stopped; removed {work} (the exported variables point nowhere now)")


def _run_in(args: Any, work: Path, out: Callable[[str], None]) -> int:
    from reconciler.emulator import Emulator

    token = work / "token"
    token.write_text("demo-token\n")
    token.chmod(0o600)
    with Emulator(speed=args.speed, project=DEMO_PROJECT) as emu:
        emu.set_capacity("us-central2-b", "v4-8", 1)
        emu.set_capacity("europe-west4-a", "v6e-8", 0)
        emu.set_capacity("us-east1-d", "v6e-8", 1)
        # Every Google endpoint gcloud would dial goes to the emulator or is turned off, so
        # the demo, and a CLI verb run with the printed variables, never reach the network.
        env_vars = {
            **emu.gcloud_env(str(work / "gcloud"), str(token), DEMO_PROJECT),
            "TPU_RECONCILER_FILE": str(work / "desired.yaml"),
            "TPU_RECONCILER_STATE_DIR": str(work / "state"),
        }
        os.environ.update(env_vars)
        desired_path = work / "desired.yaml"
        desired_path.write_text(DESIRED.format(backend=args.backend))
        out(
            f"tpu-reconciler demo — emulator at {emu.url}, backend {args.backend}, "
            f"speed x{args.speed:g}; files in {work}"
        )
        out("(no real project, no real gcloud configuration is touched)")
        return asyncio.run(_main(args, emu, desired_path, work, env_vars, out))


async def _main(
    args: Any,
    emu: Any,
    desired_path: Path,
    work: Path,
    env_vars: dict[str, str],
    out: Callable[[str], None],
) -> int:
    from reconciler.adapters.statedir import StateDir
    from reconciler.runtime.lock import ControllerLock

    state = StateDir(work / "state").ensure()
    # The same lock as `run`: `status` says the controller is running, and a second `run` on
    # these files is refused while the demo acts.
    with ControllerLock(state, desired=desired_path):
        return await _drive(args, emu, desired_path, work, env_vars, out, state)


async def _drive(
    args: Any,
    emu: Any,
    desired_path: Path,
    work: Path,
    env_vars: dict[str, str],
    out: Callable[[str], None],
    state: Any,
) -> int:
    from reconciler.core.render import format_status
    from reconciler.runtime.assemble import build_controller
    from reconciler.surfaces.cli._snapshot import current_status

    # Built as `run` builds it, capacity history included: `history` and `recommend` show
    # the demo's waits, race and preemption.
    controller = build_controller(desired_path, state, allow_destructive=True, history=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: its terminal closed
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.create_task(controller.run(stop))
    story = _Story(out, emu, controller)
    narrator = asyncio.create_task(_narrate(story, state.events, stop))
    code = EX_OK
    telling = asyncio.create_task(_tell(story, desired_path))
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({telling, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not telling.done():  # Ctrl-C mid-story
        telling.cancel()
        out("interrupted")
        code = EX_INTERRUPTED
    elif (failure := telling.exception()) is not None:
        if not isinstance(failure, DemoFailed):
            raise failure
        out(f"✗ demo failed: {failure}")
        code = failure.exit_code
    if code != EX_INTERRUPTED:
        await asyncio.sleep(0.5)
        ns = type("Args", (), {"file": desired_path, "state_dir": work / "state"})()
        out("")
        out(format_status(current_status(ns), time.time()).rstrip())
        counts = emu.request_counts()
        out("")
        out(
            "requests the emulator served: "
            + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        )
    if args.keep and code == EX_OK:
        out("")
        out("Still running (Ctrl-C stops it and removes its files). In another shell:")
        for key, value in env_vars.items():
            out(f"  export {key}={value}")
        out("  tpu-reconciler status   # or: gcloud compute tpus queued-resources list --zone=-")
        out("                          #     gcloud compute instances list")
        await stop.wait()
    stop.set()
    stopped.cancel()
    await task
    narrator.cancel()
    return code


_SYMBOLS = {"create": "+", "delete": "-", "replace": "-/+"}


async def _narrate(story: _Story, events: Path, stop: asyncio.Event) -> None:
    """Print the controller's own decisions from its event log, as they happen."""
    from reconciler.runtime.events import follow_events

    async for e in follow_events(events, stop=stop, limit=0, poll_interval=0.05):
        kind = e.get("kind")
        if kind == "qr.state":
            story.seen.add((str(e.get("slot")), str(e.get("after"))))
        elif kind == "action.started":
            symbol = _SYMBOLS.get(str(e.get("action")), "~")
            story.say(
                f"  controller: {symbol} {e.get('action')} {e.get('slot')} — {e.get('reason')}"
            )
        elif kind == "action.failed":
            story.say(f"  controller: {e.get('action')} {e.get('slot')} failed: {e.get('error')}")
        elif kind == "desired.invalid":
            story.say("  controller: desired.yaml invalid; keeping the last valid intent")
        elif kind in ("desired.valid", "desired.loaded") and story.restored:
            story.say("  controller: desired.yaml valid again; back on the file as saved")
            story.reloaded = True
