"""Builders for planner test values: desired intent, observed worlds, and a simulated apply.

Plain functions, no fixtures. Defaults are the common case (a held spot v4-8 in us-central2-b)
so a test names only what it is about. ``apply_plan`` is the simulated cloud + controller used
by the idempotence properties: it turns a plan into the world (and memory) that results.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from reconciler.adapters.tpu_api_parse import API, KIND, QRState, request_state
from reconciler.core.memory import (
    Memory,
    record_dead_replaced,
    record_failure,
    record_notice,
    record_setup,
)
from reconciler.core.plan import SETUP_KINDS, Action, Kind, Plan
from reconciler.model.capacity import (
    MANAGED_LABEL,
    MANAGED_VALUE,
    CapacityRequest,
    ErrorInfo,
    Initiator,
)
from reconciler.model.desired import (
    DEFAULT_RUNTIME_VERSIONS,
    Desired,
    RaceGroupSpec,
    Settings,
    SetupSpec,
    SlotSpec,
)
from reconciler.model.names import accelerator_family
from reconciler.model.observed import NetworkEndpoint, Node, NodeState, Observation

Z1 = "us-central2-b"
Z2 = "europe-west4-a"
Z3 = "us-east1-d"
ZONES = (Z1, Z2, Z3)
LABELS = MappingProxyType({MANAGED_LABEL: MANAGED_VALUE})

# --- desired ---------------------------------------------------------------------------------


def setup(
    *,
    bootstrap: bool = False,
    tailscale: bool = False,
    tmux: bool = False,
    generation: int = 0,
    scripts: Sequence[str] = (),
) -> SetupSpec:
    """Setup flags; everything off by default so a test turns on only what it checks."""
    return SetupSpec(
        bootstrap=bootstrap,
        tailscale=tailscale,
        tmux=tmux,
        generation=generation,
        scripts=tuple(scripts),
    )


def slot(
    name: str,
    zone: str = Z1,
    *,
    accelerator: str = "v4-8",
    want: str | None = "held",
    mode: str = "spot",
    runtime_version: str | None = None,
    valid_until: int | None = None,
    flags: SetupSpec | None = None,
) -> SlotSpec:
    """A slot outside any race group (``desired`` fills in race membership and order)."""
    return SlotSpec(
        name=name,
        zone=zone,
        accelerator=accelerator,
        mode=mode,
        runtime_version=runtime_version
        or DEFAULT_RUNTIME_VERSIONS[accelerator_family(accelerator)],
        want=want,
        valid_until_seconds=valid_until,
        setup=flags or setup(),
    )


def group(name: str, *slots: str, count: int = 1) -> RaceGroupSpec:
    return RaceGroupSpec(name=name, count=count, slots=tuple(slots))


def desired(*slots: SlotSpec, groups: Iterable[RaceGroupSpec] = (), **settings: Any) -> Desired:
    """Resolved intent, as the loader would build it: file order, race membership, no want
    on race candidates."""
    groups = tuple(groups)
    member = {name: g.name for g in groups for name in g.slots}
    specs = tuple(
        replace(
            s,
            order=i,
            race_group=member.get(s.name),
            want=None if s.name in member else s.want,
        )
        for i, s in enumerate(slots)
    )
    return Desired(
        project="my-project-123",
        settings=Settings.model_validate(settings),
        slots=specs,
        race_groups=groups,
    )


# --- observed --------------------------------------------------------------------------------


def qr(
    name: str,
    zone: str = Z1,
    state: QRState = QRState.ACCEPTED,
    *,
    accelerator: str | None = "v4-8",
    labelled: bool = True,
    created: str | None = "2026-11-30T09:00:00Z",
    initiator: str | None = None,
    error: ErrorInfo | None = None,
    node_id: str | None = None,
    raw_state: str = "",
) -> CapacityRequest:
    """A TPU API queued resource in ``state`` (the API's word), read as the TPU adapter
    reads one (``adapters/tpu_api_parse``)."""
    return CapacityRequest(
        name=name,
        zone=zone,
        state=request_state(state),
        api=API,
        api_kind=KIND,
        api_state=state.value,
        raw_state=raw_state or state.value,
        ended_by=Initiator(initiator) if initiator else None,
        node_name=node_id,
        accelerator=accelerator,
        image="tpu-ubuntu2204-base",
        mode="spot",
        labels=LABELS if labelled else MappingProxyType({}),
        create_time=created,
        error=error,
    )


def node(
    name: str,
    zone: str = Z1,
    state: NodeState = NodeState.READY,
    *,
    uid: str = "1001",
    ips: Sequence[str] = ("10.0.0.2",),
    health: str | None = "HEALTHY",
    accelerator: str = "v4-8",
) -> Node:
    return Node(
        name=name,
        zone=zone,
        state=state,
        health=health,
        accelerator_type=accelerator,
        create_time="2026-11-30T09:05:00Z",
        uid=uid,
        endpoints=tuple(NetworkEndpoint(ip, external_ip=None) for ip in ips),
        labels=LABELS,
    )


def active(
    name: str, zone: str = Z1, *, uid: str = "1001", accelerator: str = "v4-8"
) -> tuple[CapacityRequest, Node]:
    """An ACTIVE QR with its READY node: a TPU you can SSH into."""
    return (
        qr(name, zone, QRState.ACTIVE, accelerator=accelerator),
        node(name, zone, uid=uid, accelerator=accelerator),
    )


def world(
    *items: CapacityRequest | Node | tuple[CapacityRequest, Node],
    unreachable: Iterable[str] = (),
    zones: Iterable[str] | None = None,
) -> Observation:
    """An observation of the given QRs and nodes (pairs from ``active`` are flattened)."""
    qrs: list[CapacityRequest] = []
    nodes: list[Node] = []
    for item in items:
        for part in item if isinstance(item, tuple) else (item,):
            if isinstance(part, CapacityRequest):
                qrs.append(part)
            else:
                nodes.append(part)
    return Observation(
        requests=tuple(qrs),
        nodes=tuple(nodes),
        unreachable=frozenset(unreachable),
        zones=None if zones is None else frozenset(zones),
    )


# --- the simulated apply -----------------------------------------------------------------------


def fresh_qr(spec: SlotSpec, n: int) -> CapacityRequest:
    """What a successful create leaves behind: a labelled QR waiting in the queue."""
    return qr(
        spec.name,
        spec.zone,
        QRState.ACCEPTED,
        accelerator=spec.accelerator,
        created=f"2026-12-01T00:00:{n % 60:02d}Z",
    )


def apply_plan(
    plan: Plan, desired: Desired, observed: Observation, memory: Memory, now: float = 0.0
) -> tuple[Observation, Memory]:
    """The world and memory after every action of ``plan`` succeeded.

    create -> an ACCEPTED QR; delete -> the QR and its node gone; replace -> the dead QR
    replaced by a fresh ACCEPTED one (the delete and the later create collapsed into one pass);
    setup steps and notices -> recorded in memory.
    """
    qrs = {q.key: q for q in observed.requests}
    nodes = {n.key: n for n in observed.nodes}
    for i, a in enumerate(plan.actions):
        key = (a.zone, a.slot)
        if a.kind in (Kind.DELETE, Kind.REPLACE):
            gone = qrs.pop(key)
            nodes.pop(gone.node_key, None)
        if a.kind is Kind.CREATE:
            assert key not in qrs, f"create over an existing QR {key}"
            spec = desired.slot(a.slot)
            assert spec is not None
            qrs[key] = fresh_qr(spec, i)
        elif a.kind is Kind.REPLACE:
            spec = desired.slot(a.slot)
            assert spec is not None
            memory = record_dead_replaced(memory, a.slot, now)
            qrs[key] = fresh_qr(spec, i)
        elif a.kind in SETUP_KINDS:
            assert a.instance is not None
            memory = record_setup(memory, a.slot, a.kind.value, a.instance, a.generation)
    for notice in plan.notices:
        memory = record_notice(memory, notice.key)
    return (
        Observation(
            requests=tuple(qrs.values()),
            nodes=tuple(nodes.values()),
            unreachable=observed.unreachable,
            zones=observed.zones,
        ),
        memory,
    )


# --- a world at scale ----------------------------------------------------------------------------

_STATES = (
    (None, 20),  # not queued
    (QRState.ACCEPTED, 10),
    (QRState.WAITING_FOR_RESOURCES, 20),
    (QRState.PROVISIONING, 5),
    (QRState.ACTIVE, 30),
    (QRState.SUSPENDED, 5),
    (QRState.FAILED, 5),
    (QRState.DELETING, 5),
)


def scaled_world(
    n: int, *, seed: int = 0, race_share: float = 0.2, group_size: int = 8
) -> tuple[Desired, Observation]:
    """``n`` slots over three zones in a realistic mix of states: about ``race_share`` of them
    race in groups of ``group_size`` (count 1-2), a tenth are released, ACTIVE ones have READY
    nodes with setup on, and a few unmanaged QRs sit beside them."""
    rng = random.Random(seed)
    states = [s for s, _ in _STATES]
    weights = [w for _, w in _STATES]
    flags = setup(bootstrap=True, tailscale=True, tmux=True)
    specs: list[SlotSpec] = []
    groups: list[RaceGroupSpec] = []
    items: list[CapacityRequest | Node] = []
    racing = int(n * race_share) // group_size * group_size
    for i in range(n):
        zone = ZONES[i % 3]
        accelerator = "v6e-8" if i < racing else "v4-8"
        want = "released" if i >= racing and rng.random() < 0.1 else "held"
        spec = slot(f"s{i}", zone, accelerator=accelerator, want=want, flags=flags)
        specs.append(spec)
        if i < racing and i % group_size == group_size - 1:
            members = tuple(f"s{j}" for j in range(i - group_size + 1, i + 1))
            groups.append(group(f"race{i // group_size}", *members, count=1 + i % 2))
        state = rng.choices(states, weights)[0]
        if state is None:
            continue
        items.append(qr(spec.name, zone, state, accelerator=accelerator))
        if state in (QRState.ACTIVE, QRState.PROVISIONING):
            items.append(node(spec.name, zone, uid=str(i), accelerator=accelerator))
    for j in range(max(1, n // 100)):
        items.append(qr(f"stray{j}", ZONES[j % 3], QRState.ACTIVE, labelled=j % 2 == 0))
    return desired(*specs, groups=groups), world(*items)


# --- reading plans -----------------------------------------------------------------------------


def brief(plan: Plan) -> list[tuple[str, str, str]]:
    """The actions as (symbol, kind, slot): what a table row compares against."""
    return [(a.symbol, a.kind.value, a.slot) for a in plan.actions]


def failed(
    action: Action,
    *,
    memory: Memory | None = None,
    now: float = 0.0,
    permanent: bool = False,
    message: str = "boom",
) -> Memory:
    """Memory after ``action`` failed once at ``now`` (as the controller records it)."""
    return record_failure(
        memory or Memory(),
        action.key,
        message=message,
        now=now,
        permanent=permanent,
        fingerprint=action.fingerprint,
    )
