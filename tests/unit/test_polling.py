"""The controller's poll speed: ``Controller.next_interval(PassResult)`` as the world moves.

Two ways in, no sleeping anywhere:
- pass results built from values (``tests.support.worlds``) and the real planner, one per
  state, to pin which observations count as motion;
- the controller's own passes over a scripted cloud with a fake clock that advances by each
  interval the controller asks for, following one slot from queued to ACTIVE to released.

Defaults here: ``poll_interval`` 30 s (slow), ``fast_poll_interval`` 5 s; with +-10 % jitter a
fast answer is in [4.5, 5.5] and a slow one in [27, 33], so the two never overlap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

import pytest

from reconciler.adapters.cloud import CreateRequest, Submitted
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import memory as mem
from reconciler.core.plan import Action, Kind, plan
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation
from reconciler.runtime.controller import Controller, PassResult
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from tests.support import worlds as w
from tests.support.fakecloud import FakeCloud

SLOW, FAST = 30.0, 5.0


def is_fast(seconds: float) -> bool:
    return FAST * 0.9 <= seconds <= FAST * 1.1


def is_slow(seconds: float) -> bool:
    return SLOW * 0.9 <= seconds <= SLOW * 1.1


def controller(tmp_path: Path, cloud: FakeCloud, text: str = "") -> Controller:
    path = tmp_path / "desired.yaml"
    path.write_text(text or desired_text())
    state = StateDir(tmp_path / "state").ensure()
    return Controller(
        store=DesiredLoader(path, {}),
        state=state,
        cloud_factory=lambda d: cloud,
        events=EventLog(state),
        setup=None,
    )


def desired_text(want: str = "held") -> str:
    return f"""\
project: test-project
settings: {{poll_interval: {SLOW:g}s, fast_poll_interval: {FAST:g}s}}
defaults:
  setup: {{tmux: false}}
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: {want}
"""


def result(desired: Desired, observed: Observation) -> PassResult:
    """What a pass that dispatched nothing (everything already in flight or done) returns."""
    return PassResult(desired, observed, plan(desired, observed, None, 0.0), dispatched=[])


def values_desired(*slots: str, race: tuple[str, ...] = ()) -> Desired:
    specs = [w.slot(name) for name in slots] + [w.slot(name) for name in race]
    groups = [w.group("any", *race)] if race else []
    return w.desired(*specs, groups=groups, poll_interval=SLOW, fast_poll_interval=FAST)


# --- which observations count as motion -------------------------------------------------------


@pytest.mark.parametrize(
    "state",
    [
        QRState.CREATING,
        QRState.ACCEPTED,
        QRState.WAITING_FOR_RESOURCES,
        QRState.PROVISIONING,
        QRState.SUSPENDING,
        QRState.DELETING,
    ],
)
def test_a_slot_in_a_moving_state_polls_fast(tmp_path: Path, state: QRState) -> None:
    c = controller(tmp_path, FakeCloud())
    desired = values_desired("alpha", "beta")
    observed = w.world(w.active("alpha"), w.qr("beta", state=state))
    assert is_fast(c.next_interval(result(desired, observed)))


def test_every_slot_active_polls_slow(tmp_path: Path) -> None:
    c = controller(tmp_path, FakeCloud())
    desired = values_desired("alpha", "beta")
    observed = w.world(w.active("alpha"), w.active("beta", uid="1002"))
    decided = result(desired, observed)
    assert decided.plan is not None and decided.plan.empty
    assert is_slow(c.next_interval(decided))


def test_a_strangers_queued_resource_moving_does_not_speed_up_polling(tmp_path: Path) -> None:
    c = controller(tmp_path, FakeCloud())
    desired = values_desired("alpha")
    observed = w.world(w.active("alpha"), w.qr("not-ours", state=QRState.PROVISIONING))
    assert is_slow(c.next_interval(result(desired, observed)))


def test_an_open_race_polls_fast_even_when_nothing_moves(tmp_path: Path) -> None:
    c = controller(tmp_path, FakeCloud())
    desired = values_desired(race=("cand-a", "cand-b"))
    # Both candidates dead (SUSPENDED, FAILED: not moving), nothing dispatched: still racing.
    observed = w.world(
        w.qr("cand-a", state=QRState.SUSPENDED), w.qr("cand-b", w.Z2, state=QRState.FAILED)
    )
    decided = result(desired, observed)
    assert decided.plan is not None and any(r.open for r in decided.plan.races)
    assert is_fast(c.next_interval(decided))


def test_a_won_race_polls_slow(tmp_path: Path) -> None:
    c = controller(tmp_path, FakeCloud())
    desired = values_desired(race=("cand-a", "cand-b"))
    observed = w.world(w.active("cand-a"))
    decided = result(desired, observed)
    assert decided.plan is not None and not any(r.open for r in decided.plan.races)
    assert is_slow(c.next_interval(decided))


def test_a_pass_that_dispatched_actions_polls_fast(tmp_path: Path) -> None:
    c = controller(tmp_path, FakeCloud())
    desired = values_desired("alpha")
    observed = w.world()
    decided = result(desired, observed)
    assert decided.plan is not None and decided.plan.actions
    assert is_slow(c.next_interval(decided))  # nothing moves and nothing was sent yet
    decided.dispatched = list(decided.plan.actions)
    assert is_fast(c.next_interval(decided))


async def test_a_setup_step_retrying_after_a_failure_keeps_the_slow_interval(
    tmp_path: Path,
) -> None:
    # Forty ACTIVE slots with setup.tmux whose step keeps failing (an OS Login lookup that
    # cannot succeed): each retry after its backoff must not keep a steady controller fast.
    c = controller(tmp_path, FakeCloud())
    names = [f"s{i:02d}" for i in range(40)]
    desired = w.desired(
        *(w.slot(n, flags=w.setup(tmux=True)) for n in names),
        poll_interval=SLOW,
        fast_poll_interval=FAST,
    )
    observed = w.world(*(w.active(n, uid=str(1000 + i)) for i, n in enumerate(names)))
    decided = PassResult(desired, observed, plan(desired, observed, None, 0.0, []))
    assert decided.plan is not None
    steps = [a for a in decided.plan.actions if a.kind == Kind.TMUX]
    assert len(steps) == 40 and len(decided.plan.actions) == 40
    decided.dispatched = steps
    assert is_fast(c.next_interval(decided))  # a first try: it may change what we see
    for step in steps:
        c.memory = mem.record_failure(
            c.memory, step.key, message="no user", now=0.0, permanent=False,
            fingerprint=step.fingerprint, delay_hint=60.0,
        )  # fmt: skip
    assert is_slow(c.next_interval(decided))  # the same steps, sent again after a failure
    pending = asyncio.create_task(asyncio.sleep(3600))
    try:
        c.in_flight = {steps[0].key: pending}
        decided.dispatched = []
        assert is_slow(c.next_interval(decided))  # such a retry still in flight: slow too
        cloud = Action(Kind.CREATE, "s00", w.Z1, "test")
        c.in_flight = {cloud.key: pending}
        c.memory = mem.record_failure(
            c.memory, cloud.key, message="429", now=0.0, permanent=False,
            fingerprint=cloud.fingerprint,
        )  # fmt: skip
        assert is_fast(c.next_interval(decided))  # a cloud action in flight: always fast
    finally:
        pending.cancel()
        c.in_flight = {}


def test_no_valid_intent_polls_at_the_default_slow_interval(tmp_path: Path) -> None:
    c = controller(tmp_path, FakeCloud())
    assert is_slow(c.next_interval(PassResult(None, None, None)))


# --- the controller's own passes, with a fake clock ------------------------------------------


class ScriptedCloud(FakeCloud):
    """FakeCloud whose creates can be held open, and whose observations can fail."""

    def __init__(self) -> None:
        super().__init__()
        self.create_gate: asyncio.Event | None = None
        self.observe_errors: list[Exception] = []

    async def create_request(self, request: CreateRequest) -> Submitted:
        if self.create_gate is not None:
            await self.create_gate.wait()
        return await super().create_request(request)

    async def observe(self, zones: Collection[str] | None) -> Observation:
        if self.observe_errors:
            raise self.observe_errors.pop(0)
        return await super().observe(zones)


async def settle(c: Controller) -> None:
    while c.in_flight:
        await asyncio.wait(list(c.in_flight.values()))


async def test_the_controller_switches_poll_speed_as_the_world_moves(tmp_path: Path) -> None:
    cloud = ScriptedCloud()
    now = [1_000.0]
    c = controller(tmp_path, cloud)
    c.clock = lambda: now[0]
    key = ("us-central2-b", "alpha")
    seen: list[tuple[str, str]] = []

    async def step(label: str) -> float:
        res = await c.reconcile()
        delay = c.next_interval(res)
        seen.append((label, "fast" if is_fast(delay) else "slow" if is_slow(delay) else "?"))
        now[0] += delay  # the loop's wait, on the fake clock
        return delay

    cloud.create_gate = asyncio.Event()
    await step("create dispatched, still in flight")
    await step("create still in flight, nothing in the cloud yet")
    cloud.create_gate.set()
    await settle(c)
    for state in (
        QRState.ACCEPTED,
        QRState.WAITING_FOR_RESOURCES,
        QRState.PROVISIONING,
        QRState.ACTIVE,
    ):
        cloud.qrs[key] = w.qr("alpha", state=state)
        await step(state.value)
    await step("ACTIVE again")
    (tmp_path / "desired.yaml").write_text(desired_text(want="released"))
    await step("release dispatches the delete")
    await settle(c)
    assert key not in cloud.qrs
    await step("released and gone")

    assert seen == [
        ("create dispatched, still in flight", "fast"),
        ("create still in flight, nothing in the cloud yet", "fast"),
        ("ACCEPTED", "fast"),
        ("WAITING_FOR_RESOURCES", "fast"),
        ("PROVISIONING", "fast"),
        ("ACTIVE", "slow"),
        ("ACTIVE again", "slow"),
        ("release dispatches the delete", "fast"),
        ("released and gone", "slow"),
    ]
    assert cloud.calls == [("create", "alpha"), ("delete", "alpha")]


async def test_failed_observations_back_off_to_the_slow_interval_then_recover(
    tmp_path: Path,
) -> None:
    cloud = ScriptedCloud()
    cloud.qrs[("us-central2-b", "alpha")] = w.qr("alpha", state=QRState.PROVISIONING)
    c = controller(tmp_path, cloud)
    cloud.observe_errors = [TransientCloudError("503 unavailable", delay=1.0) for _ in range(6)]
    delays = []
    for _ in range(6):
        res = await c.reconcile()
        assert res.observe_error is not None
        delays.append(c.next_interval(res))
    bases = [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
    for got, base in zip(delays, bases, strict=True):
        assert base * 0.9 <= got <= base * 1.1, (delays, bases)
    recovered = await c.reconcile()  # PROVISIONING is moving: straight back to fast
    assert recovered.observe_error is None
    assert is_fast(c.next_interval(recovered))


async def test_a_permanent_observe_failure_waits_longer_than_a_fast_poll(tmp_path: Path) -> None:
    cloud = ScriptedCloud()
    cloud.observe_errors = [PermanentCloudError("PERMISSION_DENIED: tpu.queuedResources.list")]
    c = controller(tmp_path, cloud)
    res = await c.reconcile()
    assert res.observe_error is not None and "PERMISSION_DENIED" in res.observe_error
    assert c.next_interval(res) >= SLOW * 0.9
