"""Multislice: one capacity request of N slices, seen as one node per slot.

A slot with ``slices: N`` (N > 1) is one request for ``N`` nodes named ``<prefix>-0 ...
<prefix>-(N-1)`` (the prefix is the request's name; on the TPU API, one queued resource with
multislice parameters). The rest of the controller reads "the slot's node"
(``Observation.node(zone, slot)``); for a multislice request that is the *slot node*
``model/observed`` builds: every slice's workers
in slice order (slice ``s`` worker ``w`` is worker ``s * per_slice + w``), READY only when
every slice is READY, and with the slices themselves in ``Node.slices`` for what is shown.
So setup runs on every worker of every slice and a workload is one program across them.

What the TPU API does to a multislice request when *one* slice is preempted is not
documented. ``SLICE_LOSS_INTERRUPTS_REQUEST`` is the one switch for it: True (the model used)
treats a lost slice as the whole request interrupted: the slot node reads PREEMPTED (the
workload stops and is relaunched as one program, same run id, once every slice is back) and
the planner replaces the request as soon as any slice is lost, as it does a SUSPENDED one.
False: the slot node still reads PREEMPTED, but the planner waits for the cloud to end or
repair the request itself.

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from reconciler.model.capacity import CapacityRequest, RequestState
from reconciler.model.names import chip_count
from reconciler.model.observed import LOST_NODE_STATES, Node
from reconciler.model.status import SliceStatus

#: A lost slice of a multislice request interrupts it whole (see the module docstring).
SLICE_LOSS_INTERRUPTS_REQUEST: Final = True

#: Port the MEGASCALE coordinator listens on (JAX's convention for multislice).
MEGASCALE_PORT: Final = 8081


def slice_lost(node: Node | None) -> bool:
    """True when ``node`` is a slot node one of whose slices was preempted or terminated."""
    return node is not None and any(s.state in LOST_NODE_STATES for s in node.slices)


def lost_slice_replaces(request: CapacityRequest, node: Node | None) -> bool:
    """The planner's rule under ``SLICE_LOSS_INTERRUPTS_REQUEST``: a multislice request one of
    whose slices is lost is replaced like a dead one (one not already dead or being deleted)."""
    return (
        SLICE_LOSS_INTERRUPTS_REQUEST
        and request.slices > 1
        and request.state not in _OVER
        and slice_lost(node)
    )


_OVER: Final = frozenset(
    {RequestState.DELETING, RequestState.SUSPENDED, RequestState.FAILED, RequestState.ENDED}
)


def megascale_env(node: Node, slices: int) -> dict[str, str]:
    """The MEGASCALE variables every worker of a multislice slot shares: coordinator = slice 0
    worker 0's internal address. The slice id is per worker: the wrapper sets it (with
    ``TPU_RECONCILER_SLICE``) as worker // (workers // slices), from the spec's ``slices=``."""
    first: Sequence[Node] = node.slices or (node,)
    internal = first[0].ips(internal=True)
    env = {"MEGASCALE_NUM_SLICES": str(slices), "MEGASCALE_PORT": str(MEGASCALE_PORT)}
    if internal:
        env["MEGASCALE_COORDINATOR_ADDRESS"] = f"{internal[0]}:{MEGASCALE_PORT}"
    return env


def slice_rows(node: Node) -> tuple[SliceStatus, ...]:
    """``slots[].slices`` of the status snapshot: each slice's node, state, workers and IPs."""
    return tuple(
        SliceStatus(
            index=i, node=n.name, state=n.state.value, workers=len(n.endpoints), ips=n.ips()
        )
        for i, n in enumerate(node.slices)
    )


def place_accelerator(accelerator: str, slices: int) -> str:
    """The accelerator a capacity-history place records: ``v6e-64``, or ``2xv6e-64`` for a
    multislice of 2 (its waits and lifetimes are another place than one slice's)."""
    return accelerator if slices <= 1 else f"{slices}x{accelerator}"


def split_place(place: str) -> tuple[str, int]:
    """``place_accelerator`` read back: ``2xv6e-64`` -> (``v6e-64``, 2); ``v6e-64`` -> (it, 1)."""
    count, x, accelerator = place.partition("x")
    if x and count.isdigit() and int(count) > 1:
        return accelerator, int(count)
    return place, 1


def chips(accelerator: str, slices: int = 1) -> int:
    """Chips held: ``slices`` times the slice's (v4 and v5p count TensorCores, two a chip)."""
    return max(1, slices) * chip_count(accelerator)
