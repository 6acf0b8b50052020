"""The controller's pass logic, with a scripted cloud so the timing is exact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from reconciler.adapters.statedir import StateDir
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog, read_events
from tests.support.fakecloud import FakeCloud

DESIRED = """\
project: test-project
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: held
defaults:
  setup: {tmux: false}
"""


def make(
    tmp_path: Path, cloud: FakeCloud, text: str = DESIRED, *, workloads: Any = None
) -> Controller:
    path = tmp_path / "desired.yaml"
    path.write_text(text)
    state = StateDir(tmp_path / "state").ensure()
    return Controller(
        store=DesiredLoader(path, {}),
        state=state,
        cloud_factory=lambda d: cloud,  # type: ignore[arg-type,return-value]
        events=EventLog(state),
        setup=None,
        workloads=workloads,
    )


async def settle(c: Controller) -> None:
    while c.in_flight:
        await asyncio.wait(list(c.in_flight.values()))


async def test_action_finished_during_an_observation_is_not_decided_again(
    tmp_path: Path,
) -> None:
    cloud = FakeCloud()
    c = make(tmp_path, cloud)
    cloud.observe_gate = asyncio.Event()
    cloud.observe_gate.set()
    await c.reconcile()  # dispatches the create, which is still running
    assert list(c.in_flight) == ["us-central2-b/alpha:cloud"]
    cloud.observe_gate.clear()
    second = asyncio.create_task(c.reconcile())  # lists the world *before* the create lands
    await cloud.observing.wait()
    await settle(c)  # the create completes while that observation is in flight
    cloud.observe_gate.set()
    result = await second
    assert result.dispatched == []
    assert cloud.calls == [("create", "alpha")]
    third = await c.reconcile()  # a fresh look sees the QR: nothing to do
    assert third.dispatched == [] and third.plan is not None and third.plan.empty


async def test_transient_failure_backs_off_then_succeeds_and_is_forgotten(
    tmp_path: Path,
) -> None:
    cloud = FakeCloud()
    now = [1000.0]
    c = make(tmp_path, cloud)
    c.clock = lambda: now[0]
    cloud.fail_create = TransientCloudError("429 rate limited", delay=5.0)
    await c.reconcile()
    await settle(c)
    err = c.memory.error("us-central2-b/alpha:cloud")
    assert err is not None and err.failures == 1 and err.not_before >= now[0] + 5.0
    again = await c.reconcile()  # still backing off: shown as deferred, not retried
    assert again.dispatched == [] and again.plan is not None and again.plan.deferred
    now[0] += 60
    cloud.fail_create = None
    await c.reconcile()
    await settle(c)
    assert c.memory.error("us-central2-b/alpha:cloud") is None
    assert cloud.calls == [("create", "alpha"), ("create", "alpha")]


async def test_permanent_failure_blocks_until_the_intent_changes(tmp_path: Path) -> None:
    cloud = FakeCloud()
    now = [1000.0]
    c = make(tmp_path, cloud)
    c.clock = lambda: now[0]
    cloud.fail_create = PermanentCloudError("PERMISSION_DENIED: no permission to submit")
    await c.reconcile()
    await settle(c)
    now[0] += 3600  # long past any backoff
    blocked = await c.reconcile()
    assert blocked.dispatched == [] and blocked.plan is not None and blocked.plan.blocked
    cloud.fail_create = None
    (tmp_path / "desired.yaml").write_text(DESIRED.replace("v4-8", "v4-16"))
    retried = await c.reconcile()  # a changed intent is a new decision
    assert [a.slot for a in retried.dispatched] == ["alpha"]
    await settle(c)
    events = [e["kind"] for e in read_events(c.state.events)]
    assert "action.failed" in events and events.count("action.succeeded") == 1


async def test_invalid_file_from_the_start_observes_and_acts_on_nothing(tmp_path: Path) -> None:
    cloud = FakeCloud()
    c = make(tmp_path, cloud, text="project: test-project\nslots:\n  - name: [")
    result = await c.reconcile()
    assert result.desired is None and result.dispatched == []
    assert cloud.calls == []
    doc = json.loads(c.state.status.read_text())
    assert doc["desired"]["valid"] is False and "desired.yaml:3:" in doc["desired"]["errors"][0]


async def test_a_file_restored_after_an_invalid_save_is_logged_valid_again(
    tmp_path: Path,
) -> None:
    c = make(tmp_path, FakeCloud())
    await c.reconcile()
    path = tmp_path / "desired.yaml"
    path.write_text(DESIRED[:40])  # a half-written save
    await c.reconcile()
    path.write_text(DESIRED)  # the same intent again: no desired.loaded, but say it is valid
    await c.reconcile()
    await c.reconcile()
    path.write_text(DESIRED.replace("v4-8", "v4-16"))  # a new intent: loaded, not "valid"
    await c.reconcile()
    await settle(c)
    kinds = [e["kind"] for e in read_events(c.state.events) if e["kind"].startswith("desired.")]
    assert kinds == ["desired.loaded", "desired.invalid", "desired.valid", "desired.loaded"]


async def test_an_adapter_bug_in_observe_is_survived_and_shown(tmp_path: Path) -> None:
    cloud = FakeCloud()
    c = make(tmp_path, cloud)
    real = cloud.observe

    async def broken(zones: object) -> object:
        raise KeyError("a bug in the adapter")

    cloud.observe = broken  # type: ignore[method-assign,assignment]
    failed = await c.reconcile()
    assert failed.observation is None and "a bug in the adapter" in (failed.observe_error or "")
    assert '"observe_error"' in c.state.status.read_text()
    assert c.next_interval(failed) >= 5.0  # backs off instead of spinning
    cloud.observe = real  # type: ignore[method-assign]
    ok = await c.reconcile()
    assert ok.observation is not None and [a.slot for a in ok.dispatched] == ["alpha"]


async def test_the_loop_survives_a_pass_that_raises(tmp_path: Path) -> None:
    cloud = FakeCloud()
    c = make(tmp_path, cloud)
    real = c.reconcile
    calls = []

    async def flaky() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return await real()

    c.reconcile = flaky  # type: ignore[method-assign,assignment]
    stop = asyncio.Event()
    task = asyncio.create_task(c.run(stop, watch=False))
    while len(calls) < 2:
        c.wake.set()  # skip the back-off wait
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, timeout=10)
    kinds = [e["kind"] for e in read_events(c.state.events)]
    assert "controller.error" in kinds and kinds[-1] == "controller.stopped"
    assert cloud.calls == [("create", "alpha")]


async def test_an_operation_that_cannot_be_read_does_not_block_the_resend(tmp_path: Path) -> None:
    """The create's operation is remembered; its QR never shows up; reading the operation back
    is refused for good (a 403 on operations.get). That says nothing about the create, so the
    create is sent again (idempotent: ALREADY_EXISTS is done) instead of blocking the slot."""
    from reconciler.adapters.cloud import CreateRequest, OperationStatus, Outcome, Submitted

    class LostOperations(FakeCloud):
        async def create_request(self, request: CreateRequest) -> Submitted:
            self.calls.append(("create", request.name))  # accepted, then never shows up
            return Submitted(Outcome.DONE, "projects/p/locations/us-central2-b/operations/op-1")

        async def get_operation(self, name: str) -> OperationStatus | None:
            self.calls.append(("get_operation", name))
            raise PermanentCloudError("PERMISSION_DENIED: tpu.operations.get denied", code=7)

    cloud = LostOperations()
    now = [1000.0]
    c = make(tmp_path, cloud)
    c.clock = lambda: now[0]
    await c.reconcile()
    await settle(c)
    assert c.memory.operation("us-central2-b/alpha:cloud") is not None
    now[0] += 60
    again = await c.reconcile()
    await settle(c)
    assert [a.slot for a in again.dispatched] == ["alpha"]
    assert [k for k, _ in cloud.calls] == ["create", "get_operation", "create"]
    assert c.memory.error("us-central2-b/alpha:cloud") is None


async def test_an_unwritable_event_log_never_leaves_an_action_in_flight(tmp_path: Path) -> None:
    """A full or read-only state disk when a retried create comes due: its events cannot be
    written, but the create still runs, its outcome reaches memory and in_flight is cleared."""
    cloud = FakeCloud()
    now = [1000.0]
    c = make(tmp_path, cloud)
    c.clock = lambda: now[0]
    cloud.fail_create = TransientCloudError("429 rate limited", delay=5.0)
    await c.reconcile()
    await settle(c)
    assert c.memory.error("us-central2-b/alpha:cloud") is not None
    c.state.events.unlink()
    c.state.events.mkdir()  # every append now fails with an OSError (IsADirectoryError)
    cloud.fail_create = None
    now[0] += 3600.0
    result = await c.reconcile()
    assert [a.slot for a in result.dispatched] == ["alpha"]
    async with asyncio.timeout(10):  # a wedged action never leaves in_flight
        await settle(c)
    assert c.in_flight == {}
    assert c.memory.error("us-central2-b/alpha:cloud") is None  # the success was recorded
    assert cloud.calls.count(("create", "alpha")) == 2
