"""`plan` shows exactly what `run` does: both take the same look-and-decide step
(``runtime.step``), so in the same state they decide the same plan.

The state holds what made the two differ before they shared it: an operation still in
flight (a create whose request is not listed yet, remembered in memory), a confirmation
past the delete guard (``confirm.json``), and a tmux window that memory says is open but
tmux does not list. The world is the emulator's, through the production REST backend.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from reconciler.adapters.confirm_file import confirm_path, write_confirmation
from reconciler.adapters.files import write_json
from reconciler.core import memory as mem
from reconciler.core.plan import Action, Kind, Notice
from reconciler.model.desired import Desired, Settings
from reconciler.model.observed import Node
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog, read_events
from tests.fixtures.controller import Harness, desired_text

ZONE = "us-central2-b"
SLOTS = """\
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: held
    setup: {tmux: true}
  - {name: beta, zone: us-central2-b, accelerator: v4-8, want: released}
  - {name: gamma, zone: us-central2-b, accelerator: v4-8, want: released}
  - {name: delta, zone: us-central2-b, accelerator: v4-8, want: held}
"""


class Tmux:
    """The setup port, with a tmux server that lists no window (the steps do nothing)."""

    async def bootstrap(self, desired: Desired, action: Action, node: Node) -> None: ...
    async def tailscale(self, desired: Desired, action: Action, node: Node) -> None: ...
    async def tmux(self, desired: Desired, action: Action, node: Node) -> None: ...
    async def notify(self, settings: Settings, notice: Notice) -> None: ...
    async def aclose(self) -> None: ...

    async def tmux_inventory(
        self, settings: Settings, active: set[str]
    ) -> tuple[list[str], list[str]]:
        return [], []


def _controller(h: Harness, now: float, *, acting: bool) -> Controller:
    return Controller(
        store=DesiredLoader(h.path, h.env),
        state=h.state,
        cloud_factory=lambda d: make_cloud(d, h.env),
        events=EventLog(h.state),
        setup=Tmux(),
        clock=lambda: now,
        allow_destructive=acting,
    )


def _files(*paths: Path) -> dict[str, bytes | None]:
    return {p.name: p.read_bytes() if p.exists() else None for p in paths}


async def test_plan_and_run_decide_the_same_in_the_same_state(harness: Harness) -> None:
    h, now = harness, time.time()
    labels = {"managed-by": "tpu-reconciler"}
    for name in ("alpha", "beta", "gamma"):
        h.emulator.add_queued_resource(ZONE, name, "v4-8", labels=labels, state="ACTIVE")
    # the guard holds more than one delete of an ACTIVE TPU in a pass
    h.write(desired_text(SLOTS).replace("\ndefaults:", "\n  delete_guard: 1\ndefaults:", 1))

    # A first look (as `plan`): the guard holds both deletes; the node alpha runs on.
    first = _controller(h, now, acting=False)
    seen = await first.observe_and_plan()
    await first.drain()
    assert seen.plan is not None and seen.plan.guard is not None and seen.observation
    alpha = seen.observation.node(ZONE, "alpha")
    assert alpha is not None and alpha.instance

    # The state both decide from: memory with an operation in flight (delta's create, not
    # listed yet) and alpha's tmux window opened on this node; the guard's deletes confirmed.
    memory = mem.record_operation(
        mem.Memory(),
        f"{ZONE}/delta:cloud",
        mem.PendingOperation(
            f"projects/test-project/locations/{ZONE}/operations/op-in-flight",
            "create",
            ZONE,
            "delta",
            now - 5.0,
        ),
    )
    memory = mem.record_setup(memory, "alpha", "tmux", alpha.instance, 0)
    write_json(h.state.memory, mem.to_dict(memory))
    assert seen.desired is not None
    write_confirmation(h.state, list(seen.plan.guard.deletes), digest=seen.desired.digest, now=now)
    before = _files(h.state.memory, confirm_path(h.state))

    planner = _controller(h, now, acting=False)
    planned = await planner.observe_and_plan()  # what `plan` shows
    await planner.drain()
    assert _files(h.state.memory, confirm_path(h.state)) == before  # `plan` changed nothing
    events = len(read_events(h.state.events))

    runner = _controller(h, now, acting=True)
    ran = await runner.reconcile()  # what `run` does
    await runner.drain()

    assert planned.plan is not None and ran.plan is not None
    assert planned.plan == ran.plan
    decided = {(a.kind, a.slot) for a in ran.plan.actions}
    assert {
        (Kind.DELETE, "beta"),  # confirmed past the guard
        (Kind.DELETE, "gamma"),
        (Kind.CREATE, "delta"),  # the operation in flight is read back before it is resent
        (Kind.TMUX, "alpha"),  # tmux does not list the window memory says is open
    } <= decided
    assert ran.plan.guard is None
    assert sorted(a.key for a in ran.dispatched) == sorted(a.key for a in ran.plan.actions)
    assert len(read_events(h.state.events)) > events  # `run` keeps its record; `plan` wrote none
    assert json.loads(h.state.memory.read_text()) != json.loads(before["memory.json"] or b"{}")
