"""Multislice, pure: the slot node folded from a QR's slices, the planner's rules for a
multislice slot (one table), the create request and its two encodings, the workload's
slice variables, and what history and quota count."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from reconciler.adapters._gcloud_args import create_args
from reconciler.adapters.tpu_api_body import create_body
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.adapters.workload_wire import encode_spec
from reconciler.core import workload as wl
from reconciler.core.memory import Memory, observe
from reconciler.core.plan import Kind, plan
from reconciler.core.render import status_rows
from reconciler.core.status import build_status
from reconciler.intent.views import _slot_view, format_slot_info
from reconciler.model import multislice
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, WorkloadSpec
from reconciler.model.load import parse_desired
from reconciler.model.observed import Node, NodeState, Observation
from reconciler.model.requests import CreateRequest
from reconciler.surfaces.tui._frame import _slot_row
from tests.support.worlds import Z1, Z2, brief, desired, group, node, qr, slot, world

IPS = (("10.0.0.2", "10.0.0.3"), ("10.0.1.2", "10.0.1.3"))


def ms_qr(state: QRState = QRState.ACTIVE, count: int = 2, name: str = "a") -> CapacityRequest:
    return replace(qr(name, state=state, accelerator="v4-16"), slices=count)


def slices(*states: NodeState, uids: tuple[str, ...] = ("11", "12")) -> list[Node]:
    return [
        node(f"a-{i}", state=s, uid=uids[i], ips=IPS[i], accelerator="v4-16")
        for i, s in enumerate(states)
    ]


def held(**over: object) -> Desired:
    return desired(replace(slot("a", accelerator="v4-16"), slices=2, **over))  # type: ignore[arg-type]


# --- the slot node -----------------------------------------------------------------------------


def test_the_slot_node_is_every_slice_in_order_and_ready_only_when_all_are() -> None:
    seen = world(ms_qr(), *slices(NodeState.READY, NodeState.READY))
    n = seen.node(Z1, "a")
    assert n is not None and n.state is NodeState.READY
    assert n.ips() == (*IPS[0], *IPS[1]) and [s.name for s in n.slices] == ["a-0", "a-1"]
    assert seen.node(Z1, "a-1") is not None  # the slices stay visible by their own names

    creating = world(ms_qr(QRState.PROVISIONING), *slices(NodeState.READY, NodeState.CREATING))
    assert creating.node(Z1, "a").state is NodeState.CREATING  # type: ignore[union-attr]
    missing = world(ms_qr(QRState.PROVISIONING), *slices(NodeState.READY)[:1])
    assert missing.node(Z1, "a").state is NodeState.CREATING  # type: ignore[union-attr]
    lost = world(ms_qr(), *slices(NodeState.READY, NodeState.PREEMPTED))
    assert lost.node(Z1, "a").state is NodeState.PREEMPTED  # type: ignore[union-attr]
    assert world(ms_qr(QRState.WAITING_FOR_RESOURCES)).node(Z1, "a") is None


def test_the_slot_node_instance_changes_when_any_slice_is_recreated() -> None:
    first = world(ms_qr(), *slices(NodeState.READY, NodeState.READY)).node(Z1, "a")
    again = world(ms_qr(), *slices(NodeState.READY, NodeState.READY)).node(Z1, "a")
    other = world(ms_qr(), *slices(NodeState.READY, NodeState.READY, uids=("11", "99")))
    assert first is not None and again is not None
    assert first.instance == again.instance != other.node(Z1, "a").instance  # type: ignore[union-attr]


def test_a_qr_without_multislice_params_is_read_as_before() -> None:
    seen = world(qr("a", state=QRState.ACTIVE), node("a"), node("a-0"))
    n = seen.node(Z1, "a")
    assert n is not None and n.slices == () and n.name == "a"


# --- the planner -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    seen: Observation
    actions: list[tuple[str, str, str]]
    warns: str | None = None


ROWS = [
    Row("nothing queued: one create", world(), [("+", "create", "a")]),
    Row("queued: wait", world(ms_qr(QRState.WAITING_FOR_RESOURCES)), []),
    Row("both slices READY: nothing to do", world(ms_qr(), *slices(*[NodeState.READY] * 2)), []),
    Row(
        "one slice PREEMPTED while the QR reads ACTIVE: the whole QR is replaced",
        world(ms_qr(), *slices(NodeState.READY, NodeState.PREEMPTED)),
        [("-/+", "replace", "a")],
    ),
    Row(
        "one slice TERMINATED while SUSPENDING: replaced",
        world(ms_qr(QRState.SUSPENDING), *slices(NodeState.TERMINATED, NodeState.READY)),
        [("-/+", "replace", "a")],
    ),
    Row(
        "SUSPENDED: replaced once, as any dead QR",
        world(ms_qr(QRState.SUSPENDED), *slices(NodeState.READY, NodeState.PREEMPTED)),
        [("-/+", "replace", "a")],
    ),
    Row(
        "DELETING with a lost slice: wait for it to go",
        world(ms_qr(QRState.DELETING), *slices(NodeState.DELETING, NodeState.PREEMPTED)),
        [],
    ),
    Row(
        "the QR holds another slice count: replaced (it cannot change in place)",
        world(ms_qr(count=3), *slices(*[NodeState.READY] * 2)),
        [("-/+", "replace", "a")],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_planner(row: Row) -> None:
    memory = observe(Memory(), held(), row.seen, 0.0)
    p = plan(held(), row.seen, memory, 0.0)
    assert brief(p) == row.actions
    if row.warns:
        assert any(row.warns in w for w in p.warnings), p.warnings


def test_the_create_asks_for_every_slice() -> None:
    (create,) = plan(held(), world(), Memory(), 0.0).actions
    assert create.create is not None and create.create.slices == 2


def test_with_the_switch_off_a_lost_slice_waits_for_the_cloud(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(multislice, "SLICE_LOSS_INTERRUPTS_REQUEST", False)
    seen = world(ms_qr(), *slices(NodeState.READY, NodeState.PREEMPTED))
    assert brief(plan(held(), seen, observe(Memory(), held(), seen, 0.0), 0.0)) == []


def test_setup_waits_for_every_slice_then_runs_on_the_slot_node() -> None:
    want = held(setup=replace(slot("a").setup, bootstrap=True))
    half = world(ms_qr(QRState.PROVISIONING), *slices(NodeState.READY, NodeState.CREATING))
    assert brief(plan(want, half, observe(Memory(), want, half, 0.0), 0.0)) == []
    ready = world(ms_qr(), *slices(NodeState.READY, NodeState.READY))
    (boot,) = plan(want, ready, observe(Memory(), want, ready, 0.0), 0.0).actions
    assert boot.kind is Kind.BOOTSTRAP and boot.instance == ready.node(Z1, "a").instance  # type: ignore[union-attr]


# --- encodings ---------------------------------------------------------------------------------


def request(count: int) -> CreateRequest:
    return CreateRequest("a", Z1, "v4-16", "tpu-ubuntu2204-base", "spot", slices=count)


def test_rest_body_and_gcloud_flags() -> None:
    (spec,) = create_body("my-project", request(2), now=0.0)["tpu"]["nodeSpec"]
    assert "nodeId" not in spec
    assert spec["multisliceParams"] == {"nodeCount": 2, "nodeIdPrefix": "a"}
    args = create_args(request(2))
    assert "--node-count=2" in args and "--node-prefix=a" in args
    assert not any(a.startswith("--node-id") for a in args)
    assert create_body("my-project", request(1), now=0.0)["tpu"]["nodeSpec"][0]["nodeId"] == "a"
    assert "--node-id=a" in create_args(request(1))


def test_the_key_loads_on_slots_and_generators_and_is_bounded() -> None:
    text = (
        "project: my-project\nslots:\n  - {name: a, zone: us-central2-b, accelerator: v4-32, "
        "want: held, slices: 2}\n"
        "generate:\n  - {zones: [europe-west4-a], accelerators: {v6e-64: 1}, want: held, "
        "slices: 4}\n"
    )
    loaded = parse_desired(text)
    assert [s.slices for s in loaded.slots] == [2, 4]
    for bad in ("0", "65"):
        with pytest.raises(Exception, match="slices"):
            parse_desired(text.replace("slices: 2", f"slices: {bad}"))


# --- the workload ------------------------------------------------------------------------------


def test_the_launch_carries_the_slices_and_the_megascale_variables() -> None:
    job = WorkloadSpec(command="python3 train.py", env=(("MEGASCALE_PORT", "9000"),))
    spec = replace(held().slots[0], workload=job)
    n = world(ms_qr(), *slices(NodeState.READY, NodeState.READY)).node(Z1, "a")
    assert n is not None
    act = wl.WorkloadAct("launch", run_id="r1", attempt=1)
    req = wl.launch_request(spec, act, 4, n)
    assert req.slices == 2 and req.workers == 4
    assert req.env == {
        "MEGASCALE_NUM_SLICES": "2",
        "MEGASCALE_PORT": "9000",  # the user's own value wins
        "MEGASCALE_COORDINATOR_ADDRESS": "10.0.0.2:8081",
    }
    assert b"slices=2\0" in encode_spec(req, {})
    single = wl.launch_request(replace(spec, slices=1), act, 2, n)
    assert single.slices == 1 and b"slices=" not in encode_spec(single, {})


# --- what is shown and counted -----------------------------------------------------------------


def test_status_shows_every_slice() -> None:
    want = held()
    seen = world(ms_qr(), *slices(NodeState.READY, NodeState.CREATING))
    memory = observe(Memory(), want, seen, 0.0)
    snap = build_status(
        desired=want,
        desired_file="desired.yaml",
        errors=(),
        observation=seen,
        observed_at=0.0,
        memory=memory,
        plan=None,
        now=0.0,
        backend="rest",
    )
    (row,) = snap.slots
    assert row.node_state == "CREATING" and row.ips == (*IPS[0], *IPS[1])
    assert [(s.index, s.node, s.state, s.workers) for s in row.slices] == [
        (0, "a-0", "READY", 2),
        (1, "a-1", "CREATING", 2),
    ]
    assert "2 slices READY/CREATING" in " ".join(status_rows(snap, 0.0)[0])
    assert _slot_row(row, want).node == "CREATING 1/2 slices"  # the TUI's NODE cell
    view = _slot_view(want.slots[0], row)  # info, the TUI's info pane and MCP slot_info
    assert view["slices"] == 2 and view["observed"]["slices"][1]["node"] == "a-1"
    text = format_slot_info({**view, "ssh": {"available": False, "why": "-"}})
    assert "  slice 0: node a-0 READY, 2 workers  10.0.0.2  10.0.0.3" in text.splitlines()
    assert "  slice 1: node a-1 CREATING, 2 workers  10.0.1.2  10.0.1.3" in text.splitlines()


def test_history_and_quota_count_every_slice() -> None:
    assert multislice.place_accelerator("v6e-64", 2) == "2xv6e-64"
    assert multislice.place_accelerator("v6e-64", 1) == "v6e-64"
    assert multislice.chips("v6e-64", 2) == 128
    assert multislice.chips("v4-32", 2) == 32  # v4 counts TensorCores: 16 chips a slice
    assert multislice.chips("v5litepod-16") == 16


def test_a_race_of_multislice_candidates_keeps_the_winner_whole() -> None:
    a = replace(slot("a", accelerator="v4-16", want=None), slices=2)
    b = replace(slot("b", Z2, accelerator="v4-16", want=None), slices=2)
    want = desired(a, b, groups=[group("g", "a", "b")])
    seen = world(
        ms_qr(),
        *slices(NodeState.READY, NodeState.READY),
        replace(qr("b", Z2, QRState.WAITING_FOR_RESOURCES, accelerator="v4-16"), slices=2),
    )
    p = plan(want, seen, observe(Memory(), want, seen, 0.0), 0.0)
    assert brief(p) == [("-", "delete", "b")]  # the loser goes, the winner's QR stays whole
    assert p.actions[0].force is False
    (create,) = plan(want, world(), Memory(), 0.0).actions[:1]
    assert create.create is not None and create.create.slices == 2
