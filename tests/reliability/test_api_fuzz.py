"""Hostile TPU API answers through the REST backend, served by the emulator.

The emulator answers the ``locations/-`` lists with drawn bodies (``_fuzz.api_pages``): real
items with fields dropped or retyped, unknown enum values, junk items, torn JSON, HTML error
pages, wrong shapes, ``unreachable[]`` entries good and bad, pages whose next page is garbage,
an error or the same token again — while zones drop out of the lists. Checked:

- ``RestCloud.observe`` returns an ``Observation`` or raises a ``reconciler.errors`` type;
  a multi-page answer with a broken page never yields a (partial) observation;
- the planner, given what came back, never deletes a held slot unless the answer literally said
  it was SUSPENDED or FAILED, and never acts in a zone the answer called unreachable;
- a real ``Controller`` (in-process, REST against the emulator) survives every answer, shows the
  failure in status.json ``observe_error``, backs off (next pass >= 5 s away, not the 0.2 s fast
  poll), issues no DELETE for its held slots and never re-creates them.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.rest import RestCloud
from reconciler.adapters.statedir import StateDir
from reconciler.core.plan import Kind, plan
from reconciler.emulator import Emulator, Fault
from reconciler.errors import ReconcilerError
from reconciler.model.load import parse_desired
from reconciler.model.observed import Observation
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller, PassResult
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from tests.reliability._fuzz import api_pages, claims_dead, fuzz_settings
from tests.reliability._harness import Tap, run_recorded, snapshot, wait_until

pytestmark = pytest.mark.integration

ZONES: Final = ("us-central2-b", "europe-west4-a", "us-east1-d")
QR_LIST: Final = r"/locations/-/queuedResources$"
NODE_LIST: Final = r"/locations/-/nodes$"
DESIRED: Final = """\
project: test-project
settings: {backend: rest, poll_interval: 1s, fast_poll_interval: 0.2s}
defaults: {setup: {tmux: false}}
slots:
  - {name: held-a, zone: us-central2-b, accelerator: v4-8, want: held}
  - {name: held-b, zone: europe-west4-a, accelerator: v6e-8, want: held}
  - {name: held-dead, zone: us-east1-d, accelerator: v6e-8, want: held}
  - {name: gone-c, zone: us-east1-d, accelerator: v4-8, want: released}
"""
HELD: Final = ("held-a", "held-b", "held-dead")


def _env(emu: Emulator) -> dict[str, str]:
    return {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": emu.url, "CLOUDSDK_AUTH_ACCESS_TOKEN": "t"}


def _serve(emu: Emulator, pattern: str, pages: list[tuple[int, str]]) -> None:
    for status, body in pages:
        emu.inject_fault(Fault(status=status, body=body, method="GET", path=pattern, count=1))


def _quiesce(emu: Emulator, quiet: float = 0.03, limit: float = 2.0) -> None:
    """Wait until the emulator has logged no new request for ``quiet`` seconds. When one list
    fails, ``observe`` cancels the other, but a request the server already read is still
    answered, and would take a fault meant for the next example (a flaky "unsaid" action)."""
    deadline = time.monotonic() + limit
    seen = sum(emu.request_counts().values())
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = sum(emu.request_counts().values())
        if now == seen:
            return
        seen = now


def _broken_pages(pages: list[tuple[int, str]], field: str) -> bool:
    """A multi-page answer whose later page is not a clean last page."""
    return len(pages) > 1 and pages[-1] != (200, json.dumps({field: []}))


@pytest.fixture
def world() -> Iterator[Emulator]:
    """A frozen emulator holding one QR per interesting state."""
    with Emulator(speed=0) as emu:
        label = {"managed-by": "tpu-reconciler"}
        emu.add_queued_resource("us-central2-b", "held-a", "v4-8", labels=label, state="ACTIVE")
        emu.add_queued_resource("europe-west4-a", "held-b", "v6e-8", labels=label, state="ACTIVE")
        emu.add_queued_resource("us-east1-d", "held-dead", "v6e-8", labels=label, state="FAILED")
        emu.add_queued_resource("us-east1-d", "gone-c", "v4-8", labels=label, state="ACTIVE")
        emu.add_queued_resource("us-east1-d", "stray", "v4-8", state="SUSPENDED")
        yield emu


def test_fuzzed_list_answers_raise_only_reconciler_errors(world: Emulator) -> None:
    emu = world
    desired = parse_desired(DESIRED)
    qr_items, node_items = emu.queued_resources(), emu.nodes()
    loop = asyncio.new_event_loop()
    cloud = RestCloud("test-project", env=_env(emu), timeout=10.0)
    outcomes: collections.Counter[str] = collections.Counter()

    @fuzz_settings()
    @given(
        api_pages("queuedResources", qr_items),
        api_pages("nodes", node_items),
        st.sets(st.sampled_from(ZONES), max_size=2),
    )
    def check(
        qr_pages: list[tuple[int, str]], node_pages: list[tuple[int, str]], dark: set[str]
    ) -> None:
        emu.clear_faults()
        _serve(emu, QR_LIST, qr_pages)
        _serve(emu, NODE_LIST, node_pages)
        for zone in ZONES:
            emu.set_unreachable(zone, zone in dark)
        try:
            seen: Observation | None = loop.run_until_complete(cloud.observe(None))
        except ReconcilerError as e:
            outcomes[type(e).__name__] += 1
            _quiesce(emu)
            return
        except Exception as e:
            raise AssertionError(f"observe raised {type(e).__name__}: {e}") from e
        assert seen is not None
        outcomes["Observation"] += 1
        assert not _broken_pages(qr_pages, "queuedResources"), "a broken page was taken"
        assert not _broken_pages(node_pages, "nodes"), "a broken page was taken"
        said = [body for _, body in qr_pages]
        for action in plan(desired, seen).actions:
            assert action.zone not in seen.unreachable, f"acted in unreachable {action.zone}"
            if action.kind in (Kind.DELETE, Kind.REPLACE) and action.slot != "gone-c":
                assert claims_dead(said, action.slot), f"{action.symbol} {action.slot} unsaid"

    try:
        run_recorded(
            "fuzz-api-observe",
            check,
            lambda: {"cases": sum(outcomes.values()), "outcomes": dict(outcomes)},
        )
    finally:
        emu.clear_faults()
        loop.run_until_complete(cloud.aclose())
        loop.close()


class _Driver:
    """An in-process production ``Controller`` stepped one pass at a time."""

    def __init__(self, emu: Emulator, tmp: Path) -> None:
        (tmp / "intent").mkdir()
        self.path = tmp / "intent" / "desired.yaml"
        self.path.write_text(DESIRED)
        self.state = StateDir(tmp / "state").ensure()
        env = _env(emu)
        self.loop = asyncio.new_event_loop()
        self.controller = Controller(
            store=DesiredLoader(self.path, env),
            state=self.state,
            cloud_factory=lambda d: make_cloud(d, env),
            events=EventLog(self.state),
            setup=None,
        )

    def step(self) -> PassResult:
        result = self.loop.run_until_complete(self.controller.reconcile())
        tasks = list(self.controller.in_flight.values())
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=30))
        return result

    def status(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.state.status.read_bytes())
        return doc

    def close(self) -> None:
        self.loop.run_until_complete(self.controller.drain())
        self.loop.close()


def _settle(driver: _Driver, emu: Emulator, done: Callable[[], bool], what: str) -> None:
    def stepped() -> bool:
        driver.step()
        return done()

    wait_until(what, stepped, timeout=60, step=0.05)


def test_controller_survives_fuzzed_answers_and_deletes_nothing_held(tmp_path: Path) -> None:
    tally: collections.Counter[str] = collections.Counter()
    with Emulator(speed=20) as emu:
        emu.add_queued_resource(
            "us-east1-d", "gone-c", "v4-8", labels={"managed-by": "tpu-reconciler"}, state="ACTIVE"
        )
        emu.add_queued_resource("us-central2-b", "stray", "v4-8", state="ACTIVE")
        tap = Tap(emu, random.Random(3))
        driver = _Driver(emu, tmp_path)
        try:

            def steady() -> bool:
                snap = snapshot(emu)
                states = {n: q.state for (_, n), q in snap.items()}
                return all(states.get(n) == "ACTIVE" for n in HELD) and "gone-c" not in states

            _settle(driver, emu, steady, "held slots ACTIVE, gone-c deleted")
            born = {k: q.create_time for k, q in snapshot(emu).items() if k[1] in HELD}
            start = len(tap.served())

            @fuzz_settings(ci=150, full_run=1500)
            @given(st.data())
            def check(data: st.DataObject) -> None:
                items = emu.queued_resources()
                qr_pages = data.draw(api_pages("queuedResources", items), "qr pages")
                if data.draw(st.booleans(), "fuzz nodes too"):
                    _serve(emu, NODE_LIST, data.draw(api_pages("nodes", emu.nodes()), "nodes"))
                dark = data.draw(st.sets(st.sampled_from(ZONES), max_size=2), "dark zones")
                _serve(emu, QR_LIST, qr_pages)
                for zone in ZONES:
                    emu.set_unreachable(zone, zone in dark)
                try:
                    result = driver.step()
                finally:
                    emu.clear_faults()
                tally["passes"] += 1
                status = driver.status()
                if result.observe_error is not None:
                    tally["observe_errors"] += 1
                    assert status["observe_error"] == result.observe_error
                    wait = driver.controller.next_interval(result)
                    assert wait >= 5.0, f"next pass after a failed observation in {wait:.2f}s"
                said = [body for _, body in qr_pages]
                for s in tap.served()[start:]:
                    if s.kind != "delete":
                        continue
                    assert s.name not in HELD or claims_dead(said, s.name or ""), (
                        f"DELETE of held {s.name} after {qr_pages!r}"
                    )

            def run() -> None:
                check()
                for zone in ZONES:
                    emu.set_unreachable(zone, False)
                _settle(driver, emu, steady, "steady again once the answers are sane")
                log = tap.served()[start:]
                tally["creates_refused_as_existing"] = sum(
                    s.kind == "create" and s.status == 409 for s in log
                )
                after = {k: q.create_time for k, q in snapshot(emu).items() if k[1] in HELD}
                assert after == born, "a held slot was deleted and re-created"
                held_deletes = [s for s in log if s.kind == "delete" and s.name in HELD]
                assert not held_deletes, held_deletes

            run_recorded("fuzz-api-controller", run, lambda: dict(tally))
        finally:
            driver.close()
            tap.close()
