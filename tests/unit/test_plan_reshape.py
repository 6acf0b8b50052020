"""A held request the file now describes otherwise (another API, accelerator, slice count,
machine type, topology or host count) is replaced, ``-/+``, with each change named, under the
delete guard like a delete when it deletes a running TPU; never silently kept."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import reshape
from reconciler.core.memory import Memory, observe
from reconciler.core.outcome import succeeded
from reconciler.core.plan import Kind, plan
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.observed import Observation
from tests.support.worlds import active, desired, node, qr, slot, world

V6E = "v6e-16"


def compute_slot(name: str, **changes: object) -> SlotSpec:
    """A Compute Engine v6e-16: four ct6e-standard-4t hosts, 4x4."""
    base = replace(
        slot(name, accelerator=V6E),
        api="compute",
        machine_type="ct6e-standard-4t",
        topology="4x4",
        hosts=4,
        chips=16,
        image="projects/p/global/images/family/f",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def compute_request(
    name: str, state: QRState = QRState.ACTIVE, **changes: object
) -> CapacityRequest:
    """What a Compute Engine parser reports for ``compute_slot``'s request."""
    base = replace(
        qr(name, state=state, accelerator=V6E),
        api="compute",
        api_kind="instance group",
        machine_type="ct6e-standard-4t",
        topology="4x4",
        hosts=4,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Row:
    id: str
    want: Desired
    seen: Observation
    actions: list[tuple[str, str, str]]
    reason: str = ""
    destructive: bool = False
    guarded: bool = False


ROWS = [
    Row("the same shape: nothing", desired(compute_slot("a")), world(compute_request("a")), []),
    Row(
        "a TPU API slot moved to Compute Engine: replace, running",
        desired(replace(slot("a"), api="compute", machine_type="ct5p-hightpu-4t")),
        world(*active("a")),
        [("-/+", "replace", "a")],
        "the file changes api tpu -> compute: replace it",
        destructive=True,
    ),
    Row(
        "a Compute Engine slot moved to the TPU API",
        desired(slot("a", accelerator=V6E)),
        world(compute_request("a"), node("a", accelerator=V6E)),
        [("-/+", "replace", "a")],
        "the file changes api compute -> tpu: replace it",
        destructive=True,
    ),
    Row(
        "another topology of the same chips",
        desired(compute_slot("a", topology="2x8")),
        world(compute_request("a", QRState.WAITING_FOR_RESOURCES)),
        [("-/+", "replace", "a")],
        "the file changes topology 4x4 -> 2x8: replace it",
    ),
    Row(
        "another machine type: more hosts",
        desired(compute_slot("a", machine_type="ct6e-standard-1t", hosts=16)),
        world(compute_request("a", QRState.WAITING_FOR_RESOURCES)),
        [("-/+", "replace", "a")],
        "the file changes machine type ct6e-standard-4t -> ct6e-standard-1t, hosts 4 -> 16",
    ),
    Row(
        "another accelerator (once a warning, now a replace)",
        desired(slot("a", accelerator="v4-16")),
        world(*active("a")),
        [("-/+", "replace", "a")],
        "the file changes accelerator v4-8 -> v4-16",
        destructive=True,
    ),
    Row(
        "another slice count",
        desired(replace(slot("a"), slices=2)),
        world(qr("a", state=QRState.ACCEPTED)),
        [("-/+", "replace", "a")],
        "the file changes slices 1 -> 2",
    ),
    Row(
        "what the API does not report is not compared",
        desired(compute_slot("a")),
        world(compute_request("a", topology=None, hosts=None, machine_type=None)),
        [],
    ),
    Row(
        "a request being deleted is left to go",
        desired(compute_slot("a", topology="2x8")),
        world(compute_request("a", QRState.DELETING)),
        [],
    ),
    Row(
        "three running TPUs moved at once: the guard holds them",
        desired(*(replace(slot(n), api="compute") for n in "abc")),
        world(*(active(n, uid=str(i)) for i, n in enumerate("abc"))),
        [],
        guarded=True,
    ),
    Row(
        "three queued ones moved at once: not guarded (no running TPU)",
        desired(*(replace(slot(n), api="compute") for n in "abc")),
        world(*(qr(n) for n in "abc")),
        [("-/+", "replace", n) for n in "abc"],
    ),
]


def brief(actions: object) -> list[tuple[str, str, str]]:
    return [(a.symbol, a.kind.value, a.slot) for a in actions]  # type: ignore[attr-defined]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_reshape(row: Row) -> None:
    memory = observe(Memory(), row.want, row.seen, 0.0)
    p = plan(row.want, row.seen, memory, 0.0)
    assert brief(p.actions) == row.actions
    for a in p.actions:
        assert a.reshape and row.reason in a.reason
        assert a.destructive == row.destructive
        assert ("deletes a running TPU" in a.reason) == row.destructive
    guarded = [h for h in p.gated if h.gate == "guard"]
    assert bool(guarded) == row.guarded
    if row.guarded:
        assert [h.action.kind for h in guarded] == [Kind.REPLACE] * 3
        assert p.guard is not None and len(p.guard.deletes) == 3
    assert not any("holds" in w for w in p.warnings), "said as a replace, not a warning"


def test_the_delete_goes_to_the_api_that_holds_it_and_the_create_follows_on_the_new_one() -> None:
    want = desired(replace(slot("a"), api="compute", machine_type="ct5p-hightpu-4t"))
    (replaced,) = plan(want, world(*active("a")), Memory(), 0.0).actions
    assert (replaced.kind, replaced.api) == (Kind.REPLACE, "tpu")
    (create,) = plan(want, world(), Memory(), 0.0).actions
    assert (create.kind, create.api) == (Kind.CREATE, "compute")


def test_a_reshape_is_no_death_in_a_row() -> None:
    """A replace for a changed shape does not count toward the re-create backoff of dead
    requests (``record_dead_replaced``)."""
    want = desired(replace(slot("a"), api="compute"))
    (a,) = plan(want, world(qr("a")), Memory(), 0.0).actions
    assert succeeded(a, "done", Memory(), 0.0).memory.slot("a").dead_in_a_row == 0
    dead = replace(a, reshape=False)
    assert succeeded(dead, "done", Memory(), 0.0).memory.slot("a").dead_in_a_row == 1


@pytest.mark.parametrize(
    ("request_fields", "expected"),
    [
        ({}, []),
        ({"api": "compute"}, ["api compute -> tpu"]),
        ({"topology": "2x2x1"}, []),
        ({"topology": "2x2x2"}, ["topology 2x2x2 -> 2x2x1"]),
        ({"hosts": 2}, ["hosts 2 -> 1"]),
        ({"accelerator": None}, []),
    ],
)
def test_changes(request_fields: dict[str, object], expected: list[str]) -> None:
    spec = slot("a")  # a TPU API v4-8: 2x2x1, one host
    request = replace(qr("a", state=QRState.ACTIVE), **request_fields)  # type: ignore[arg-type]
    assert reshape.changes(spec, request) == expected
