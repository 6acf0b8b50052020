"""One program across a race group's winners (``workload.across: group``), as a value.

The group's winners are seen as ONE virtual multislice slot named after the group: its node's
slices are the winners (ACTIVE, READY, set up, among the ``count`` the race keeps) sorted by
name, so slice ``s`` worker ``w`` is worker ``s * per_slice + w`` and the multislice launch
path (``core.workload.launch_request``: MEGASCALE variables, coordinator = slice 0 worker 0's
internal IP, port 8081; the wrapper derives each worker's slice) runs it unchanged. JAX's
process id ``worker + slice_id * per_slice`` is then distinct for every worker.

``view(desired, observed, memory)`` adds, for each such group, that virtual slot to the
``Desired`` and its request and node to the ``Observation`` the workload steps read (``fold``,
``decide``, probes, launch, stop); the planner proper (creates, deletes, races) never sees
them. The node's instance names its members (``<group>@<hash>.<member>,<member>``), so a lost
or added winner is a new instance: the attempt reads *interrupted* (same run id) and is
relaunched over the new set once it has ``min_count`` (default ``count``) winners.

Before that relaunch the rest of the old program is stopped: while the attempt is
interrupted and some of its members are still up (``stop_for`` not yet ``lost``), the view's
node is the *remnant* (the old instance, PREEMPTED, its slices as they are now) and
``cleanup`` asks for one ``~ stop`` (why ``lost``) of the old attempt on the survivors; the
runtime stops each surviving slice with its workers' indices as they were launched.

No I/O, no clock, no await.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Final

from reconciler.core.memory import Memory
from reconciler.core.plan_values import Kind
from reconciler.core.workload import DEFAULT_GRACE, WorkloadAct
from reconciler.core.workload_memory import WorkloadMemory
from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.capacity import CapacityRequest, RequestState
from reconciler.model.desired import Desired, RaceGroupSpec, SetupSpec, SlotSpec
from reconciler.model.observed import Node, NodeState, Observation

#: ``WorkloadAct.why`` / ``WorkloadMemory.stop_for`` of the stop of a lost winner's program.
LOST: Final = "lost"
_NO_SETUP: Final = SetupSpec(bootstrap=False, tailscale=False, tmux=False)


@dataclass(frozen=True, slots=True)
class GroupView:
    spec: SlotSpec  # the virtual slot: the group's name, workload and slice count
    request: CapacityRequest
    node: Node | None  # None: no winner is up yet
    remnant: bool = False  # the old instance's survivors, to stop (see the module docstring)


def instance_members(instance: str | None) -> tuple[str, ...]:
    """The member node instances a virtual node's instance names (() for any other)."""
    if instance is None:
        return ()
    _, _, uid = instance.partition("@")
    tag, dot, members = uid.partition(".")
    return tuple(members.split(",")) if dot and tag and members else ()


def _uid(members: tuple[Node, ...]) -> str:
    names = ",".join(n.instance for n in members)
    # the hash first: host-key aliases keep the uid's first 24 characters
    return f"{hashlib.sha256(names.encode()).hexdigest()[:20]}.{names}"


def _set_up(memory: Memory, spec: SlotSpec, node: Node) -> bool:
    steps = ((Kind.BOOTSTRAP, spec.setup.bootstrap), (Kind.TAILSCALE, spec.setup.tailscale))
    return all(
        memory.setup_done(spec.name, k.value, node.instance, spec.setup.generation)
        for k, on in steps
        if on
    )


def winners(
    desired: Desired, group: RaceGroupSpec, observed: Observation, memory: Memory
) -> tuple[Node, ...]:
    """The group's winners that can run the program now, sorted by name: among the ``count``
    ACTIVE candidates the race ranks first (earliest created, then file order), those whose
    node is READY with workers and set up."""
    ranked: list[tuple[tuple[str, int], SlotSpec, CapacityRequest]] = []
    for name in group.slots:
        spec = desired.slot(name)
        request = observed.request(spec.zone, name) if spec is not None else None
        if spec is not None and request is not None and request.state == RequestState.ACTIVE:
            ranked.append(((request.create_time or "~", spec.order), spec, request))
    ranked.sort(key=lambda item: item[0])
    up: list[Node] = []
    for _, spec, request in ranked[: group.count]:
        node = observed.node(spec.zone, request.node_name or spec.name)
        ready = node is not None and node.state == NodeState.READY and bool(node.endpoints)
        if node is not None and ready and _set_up(memory, spec, node):
            up.append(node)
    return tuple(sorted(up, key=lambda n: n.name))


def _virtual(name: str, zone: str, members: tuple[Node, ...], state: NodeState) -> Node:
    first = members[0]
    return replace(
        first,
        name=name,
        zone=zone,
        state=state,
        raw_state=state.value,
        uid=_uid(members),
        create_time=None,
        endpoints=tuple(e for n in members for e in n.endpoints),
        symptoms=(),
        maintenance=None,
        request=None,
        multislice_node=False,
        slices=members,
    )


def _remnant(
    group: RaceGroupSpec, zone: str, wm: WorkloadMemory, observed: Observation
) -> Node | None:
    """The old instance's members as they are now (a lost one as a PREEMPTED placeholder),
    when some of them still run: None when none does."""
    assert wm.instance is not None
    present = {n.instance: n for n in observed.nodes if n.zone == zone}
    members = []
    for inst in instance_members(wm.instance):
        node = present.get(inst)
        if node is None or node.state != NodeState.READY:
            node = Node(inst.partition("@")[0], zone, NodeState.PREEMPTED)
        members.append(node)
    if not any(n.state == NodeState.READY for n in members):
        return None
    node = _virtual(group.name, zone, tuple(members), NodeState.PREEMPTED)
    return replace(node, uid=wm.instance.partition("@")[2])


def group_view(
    desired: Desired, group: RaceGroupSpec, observed: Observation, memory: Memory
) -> GroupView | None:
    """The virtual slot of ``group`` (None: it runs no program across its winners, or its
    candidates' zone is not known)."""
    wm = memory.workload(group.name)
    if group.workload is None and wm is None:
        return None  # (a program it ran before is stopped first: its view stays till then)
    specs = [s for n in group.slots if (s := desired.slot(n)) is not None]
    if not specs:
        return None
    first = specs[0]
    zone = first.zone
    need = max(1, group.min_count or group.count)
    node: Node | None = None
    remnant = False
    if (
        wm is not None
        and wm.phase == "interrupted"
        and wm.stop_for != LOST
        and instance_members(wm.instance)
    ):
        node = _remnant(group, zone, wm, observed)
        remnant = node is not None
    if node is None:
        up = winners(desired, group, observed, memory)
        if up:
            node = _virtual(
                group.name, zone, up, NodeState.READY if len(up) >= need else NodeState.CREATING
            )
    slices = len(node.slices) if node is not None else group.count
    spec = SlotSpec(
        name=group.name,
        zone=zone,
        accelerator=first.accelerator,
        mode=first.mode,
        runtime_version=first.runtime_version,
        want="held" if group.count > 0 else "released",
        setup=_NO_SETUP,
        order=first.order,
        workload=group.workload,
        owner=group.owner,
        slices=max(1, slices),
        # on Compute Engine the launch also tells each worker its place (core.workload)
        api=COMPUTE_API if any(s.api == COMPUTE_API for s in specs) else first.api,
    )
    request = CapacityRequest(name=group.name, zone=zone, state=RequestState.ACTIVE)
    return GroupView(spec, request, node, remnant)


def views(desired: Desired, observed: Observation, memory: Memory) -> tuple[GroupView, ...]:
    out = []
    for group in desired.race_groups:
        v = group_view(desired, group, observed, memory)
        if v is not None and observed.knows(v.spec.zone):
            out.append(v)
    return tuple(out)


def view(
    desired: Desired, observed: Observation, memory: Memory
) -> tuple[Desired, Observation, tuple[GroupView, ...]]:
    """``desired`` and ``observed`` with every across-group's virtual slot, request and node, for
    the workload steps only (unchanged when there is none)."""
    found = views(desired, observed, memory)
    if not found:
        return desired, observed, ()
    wdesired = replace(desired, slots=(*desired.slots, *(v.spec for v in found)))
    wobserved = Observation(
        requests=(*observed.requests, *(v.request for v in found)),
        nodes=(*observed.nodes, *(v.node for v in found if v.node is not None)),
        unreachable=observed.unreachable,
        zones=observed.zones,
    )
    return wdesired, wobserved, found


def group_zones(desired: Desired) -> dict[str, str]:
    """Group -> its candidates' zone, for every group running one program across winners."""
    out = {}
    for g in desired.race_groups:
        first = desired.slot(g.slots[0]) if g.workload is not None and g.slots else None
        if first is not None:
            out[g.name] = first.zone
    return out


def cleanup(v: GroupView, wm: WorkloadMemory | None) -> tuple[WorkloadAct, str] | None:
    """The stop of the rest of an interrupted program on the winners still up (remnant)."""
    if not v.remnant or wm is None or v.node is None:
        return None
    lost = [n.name for n in v.node.slices if n.state != NodeState.READY]
    grace = v.spec.workload.stop_grace if v.spec.workload else DEFAULT_GRACE
    act = WorkloadAct("stop", wm.run_id, wm.attempt, grace, LOST)
    return act, f"winner {', '.join(lost)} lost: stop attempt {wm.attempt} everywhere"
