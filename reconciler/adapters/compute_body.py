"""A neutral ``CreateRequest`` as Compute Engine's JSON: an ``Instance`` for a single-host
slice; an ``InstanceTemplate``, a workload ``ResourcePolicy``, an ``InstanceGroupManager`` and
its ``createInstances`` for a multi-host one. Field names are the google-cloud-compute SDK's
(``compute_v1.types``, in their JSON spelling); the tests decode every body with the SDK's
message classes, unknown fields refused (``tests/support/compute_sdk.py``).

What a create is made of (``Layout``), for slot ``S`` of ``slices: N`` (the ``k``-th slice's
part is named ``S`` when N is 1, else ``S-k``):

- single host (a VM is the whole slice: ``tpu7x-standard-1t``, ``ct6e-standard-8t``, one
  ``-4t`` host of a 4-chip topology): one zonal instance per slice, named like its part;
- multi-host: one global instance template ``S-tpl-T`` and one regional workload policy
  ``S-wp-T`` (``HIGH_THROUGHPUT``, ``acceleratorTopology``; never a placement policy, which
  TPU7x refuses) shared by the slices, and per slice a zonal MIG named like its part
  (``targetSizePolicy.mode: BULK``: all hosts or none; ``defaultActionOnFailure:
  DO_NOTHING``: a lost host stays lost, the controller replaces the slice whole) whose hosts
  are created by name, ``<part>-0 ... <part>-(hosts-1)``, so worker ``i`` is host ``i``.
  ``T`` is a token fresh for each create (``compute.py``), so a re-create never meets the
  template or policy of a slice being torn down.

Every resource carries the marker: instances the labels ``managed-by: tpu-reconciler``,
``tpu-reconciler-slot``, ``tpu-reconciler-slice`` (its index), ``tpu-reconciler-slices``
(the slot's count), ``tpu-accelerator`` and ``tpu-topology``; templates, policies and MIGs
(which have no labels) a ``description`` starting ``tpu-reconciler:`` with the same facts
(``describe`` / ``described``).

Scheduling per mode (``scheduling``):

    spot        SPOT, instanceTerminationAction DELETE, onHostMaintenance TERMINATE,
                automaticRestart false
    on-demand   STANDARD, onHostMaintenance TERMINATE, automaticRestart true
    reserved    RESERVATION_BOUND, DELETE, TERMINATE, and reservationAffinity
                SPECIFIC_RESERVATION of the zone's reservation (settings.reservations)
    flex-start  FLEX_START, maxRunDuration (the slot's max_run_duration), STOP (the run's end
                stays visible as a TERMINATED VM: ended, not preempted), TERMINATE,
                automaticRestart false; an instance also waits for capacity
                ``params.requestValidForDuration``: the slot's valid_until, else 7 days

What JAX needs on a host (Compute Engine is not known to fill ``tpu-env``): the metadata
``tpu-worker-id`` (the host's index in its slice) and ``tpu-worker-hostnames`` (its slice's
host names in worker order, which the VPC's internal DNS resolves), per instance (a MIG's
through ``createInstances``' ``preservedState.metadata``); the workload launch sets
``TPU_WORKER_ID`` and ``TPU_WORKER_HOSTNAMES`` from the observed addresses as well.

``setup.at_boot``: the instance's (or the template's, for every host of a MIG slice) metadata
also carries the ``startup-script`` and ``enable-guest-attributes: TRUE`` (each VM reports its
setup in a guest attribute; the script reads its index from ``tpu-worker-id``).

May: build JSON values. May not: do I/O, read a clock or make up a token (the caller does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from reconciler.errors import UnsafeName
from reconciler.model import accelerators as cat
from reconciler.model import flex, vocabulary
from reconciler.model.boot_script import boot_metadata
from reconciler.model.capacity import MANAGED_LABEL, MANAGED_VALUE
from reconciler.model.names import (
    NAME_RE,
    check_image,
    check_labels,
    check_name,
    check_network,
    check_project,
    check_zone,
)
from reconciler.model.quotas import region_of
from reconciler.model.requests import CreateRequest, max_run, window

API: Final = cat.COMPUTE_API
MODES: Final = frozenset(vocabulary.MODES)

LABEL_SLOT: Final = "tpu-reconciler-slot"
LABEL_SLICE: Final = "tpu-reconciler-slice"
LABEL_SLICES: Final = "tpu-reconciler-slices"
LABEL_ACCELERATOR: Final = "tpu-accelerator"
LABEL_TOPOLOGY: Final = "tpu-topology"
#: What a template's, policy's or MIG's description starts with.
MARK: Final = "tpu-reconciler:"
META_WORKER_ID: Final = "tpu-worker-id"
META_HOSTNAMES: Final = "tpu-worker-hostnames"

SCOPES: Final = ("https://www.googleapis.com/auth/cloud-platform",)
#: Boot disk size: the 10 GB default fails late with real workloads [3P: 200 GB is usual].
DISK_GB: Final = 200
#: Boot disk type per family: TPU7x refuses a plain PD [3P]; v6e attaches Hyperdisk [3P];
#: v5p's PD Balanced is the common choice [I].
DISK_TYPES: Final[Mapping[str, str]] = {
    "tpu7x": "hyperdisk-balanced",
    "v6e": "hyperdisk-balanced",
    "v5p": "pd-balanced",
}
#: How long a flex-start instance waits for capacity when the slot names no ``valid_until``
#: (then the slot asks again: the controller holds, it does not give up).
FLEX_WAIT: Final = 7 * 86400
RESERVATION_KEY: Final = "compute.googleapis.com/reservation-name"
_TOKEN_RE: Final = re.compile(r"^[a-z0-9]{4,12}$")
_DESCRIBED: Final = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True, slots=True)
class Layout:
    """The names one create makes (see the module docstring)."""

    slot: str
    zone: str
    parts: tuple[str, ...]  # one per slice: an instance, or a MIG
    hosts: int  # VMs per slice
    template: str | None = None  # multi-host only
    policy: str | None = None  # multi-host only: the policy's name (regional)

    @property
    def region(self) -> str:
        return region_of(self.zone)

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def policy_path(self) -> str | None:
        if self.policy is None:
            return None
        return f"regions/{self.region}/resourcePolicies/{self.policy}"

    def members(self, part: str) -> tuple[str, ...]:
        """A MIG's host names, worker order."""
        return tuple(f"{part}-{i}" for i in range(self.hosts))


def part_names(slot: str, slices: int) -> tuple[str, ...]:
    return (slot,) if slices <= 1 else tuple(f"{slot}-{k}" for k in range(slices))


def layout(request: CreateRequest, token: str) -> Layout:
    """The names of ``request``'s create, every one checked (UnsafeName when one would be
    refused: a slot name too long for its hosts' names)."""
    slot = check_name(request.name)
    zone = check_zone(request.zone)
    if not _TOKEN_RE.fullmatch(token):
        raise UnsafeName(f"invalid create token {token!r}")
    hosts = max(1, request.hosts)
    parts = part_names(slot, request.slices)
    out = Layout(slot, zone, parts, hosts)
    if hosts > 1:
        stem = slot[:40]
        out = Layout(slot, zone, parts, hosts, f"{stem}-tpl-{token}", f"{stem}-wp-{token}")
    names = [n for p in parts for n in ((p, *out.members(p)) if hosts > 1 else (p,))]
    for name in names:
        if not NAME_RE.fullmatch(name):
            raise UnsafeName(
                f"slot name {slot!r} is too long for its hosts on Compute Engine: "
                f"{name!r} passes 63 characters; use a shorter name"
            )
    return out


def machine(request: CreateRequest) -> cat.MachineType:
    """The request's machine type, from the catalogue (UnsafeName: not a TPU machine type)."""
    found = cat.MACHINE_TYPES.get(request.machine_type or "")
    if found is None:
        raise UnsafeName(
            f"invalid machine type {request.machine_type!r} for Compute Engine "
            f"(known: {', '.join(cat.MACHINE_TYPES)})"
        )
    return found


def scheduling(request: CreateRequest) -> dict[str, Any]:
    """The ``Scheduling`` of the module docstring's table."""
    mode = request.mode
    if mode not in MODES:
        raise UnsafeName(f"invalid mode {mode!r}: expected spot, on-demand, reserved or flex-start")
    if mode == "spot":
        return {
            "provisioningModel": "SPOT",
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": False,
        }
    if mode == "reserved":
        return {
            "provisioningModel": "RESERVATION_BOUND",
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": True,
        }
    if mode == flex.MODE:
        return {
            "provisioningModel": "FLEX_START",
            "instanceTerminationAction": "STOP",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": False,
            "maxRunDuration": {"seconds": str(max_run(request))},
        }
    return {
        "provisioningModel": "STANDARD",
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": True,
    }


def reservation_affinity(request: CreateRequest, reservation: str | None) -> dict[str, Any] | None:
    """SPECIFIC_RESERVATION of ``reservation`` for a reserved request, else None."""
    if request.mode != "reserved":
        return None
    if not reservation:
        raise UnsafeName(
            f"mode: reserved on Compute Engine needs the reservation to use in {request.zone}: "
            f"name it in settings.reservations ({request.zone}: NAME)"
        )
    return {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": RESERVATION_KEY,
        "values": [check_network(reservation)],
    }


def describe(**facts: object) -> str:
    """A marker description: ``tpu-reconciler: slot=S slice=0/1 ...``."""
    return MARK + "".join(f" {k}={v}" for k, v in facts.items() if v is not None and v != "")


def described(text: object) -> dict[str, str] | None:
    """The facts of a marker description; None when ``text`` is not one of ours."""
    if not isinstance(text, str) or not text.startswith(MARK):
        return None
    return dict(_DESCRIBED.findall(text[len(MARK) :]))


def labels(request: CreateRequest, part: int) -> dict[str, str]:
    """Every host's labels: the request's own (``managed-by``) and the slot's facts."""
    out = {
        **dict(request.labels),
        MANAGED_LABEL: MANAGED_VALUE,
        LABEL_SLOT: request.name,
        LABEL_SLICE: str(part),
        LABEL_SLICES: str(max(1, request.slices)),
        LABEL_ACCELERATOR: request.accelerator,
    }
    if request.topology:
        out[LABEL_TOPOLOGY] = request.topology
    return dict(sorted(check_labels(out).items()))


def _check_window(request: CreateRequest) -> None:
    """Compute Engine has no queue that starts later: a create carrying ``start_at`` is
    refused until that moment (its next create carries none, a new decision that goes at
    once), one carrying ``start_after`` always (it counts from each create)."""
    after, at, _ = window(request)
    if at is not None:
        raise UnsafeName(
            "Compute Engine cannot queue a request to start later: the create waits for "
            "start_at and is sent then"
        )
    if after is not None:
        raise UnsafeName(
            "Compute Engine cannot queue a request to start later: start_after needs "
            "api: tpu; on Compute Engine write start_at, or hold the slot when you want it"
        )


def _network(request: CreateRequest) -> dict[str, Any]:
    nic: dict[str, Any] = {}
    if request.network:
        name = check_network(request.network)
        nic["network"] = name if "/" in name else f"global/networks/{name}"
    if request.subnetwork:
        name = check_network(request.subnetwork)
        region = region_of(request.zone)
        nic["subnetwork"] = name if "/" in name else f"regions/{region}/subnetworks/{name}"
    if not request.internal_ips:
        nic["accessConfigs"] = [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    return nic


def _disk(request: CreateRequest, family: str, zone: str | None) -> dict[str, Any]:
    kind = DISK_TYPES.get(family, "pd-balanced")
    return {
        "boot": True,
        "autoDelete": True,
        "initializeParams": {
            "sourceImage": check_image(request.image),
            "diskSizeGb": str(DISK_GB),
            "diskType": kind if zone is None else f"zones/{zone}/diskTypes/{kind}",
        },
    }


def _metadata(items: Mapping[str, str]) -> dict[str, Any]:
    return {"items": [{"key": k, "value": v} for k, v in items.items()]}


def _slot_meta(request: CreateRequest) -> dict[str, str]:
    return {
        LABEL_SLOT: request.name,
        LABEL_ACCELERATOR: request.accelerator,
        **({LABEL_TOPOLOGY: request.topology} if request.topology else {}),
    }


def _properties(
    request: CreateRequest, family: str, zone: str | None, reservation: str | None
) -> dict[str, Any]:
    """What an instance and a template's ``properties`` share (``zone`` None: a template)."""
    body: dict[str, Any] = {
        "disks": [_disk(request, family, zone)],
        "networkInterfaces": [_network(request)],
        "serviceAccounts": [{"email": "default", "scopes": list(SCOPES)}],
        "scheduling": scheduling(request),
    }
    affinity = reservation_affinity(request, reservation)
    if affinity is not None:
        body["reservationAffinity"] = affinity
    return body


def instance_body(
    project: str, request: CreateRequest, part: int, *, reservation: str | None = None
) -> dict[str, Any]:
    """The ``Instance`` of a single-host slice ``part`` (0-based)."""
    check_project(project)
    _check_window(request)
    vm = machine(request)
    zone = check_zone(request.zone)
    name = part_names(request.name, request.slices)[part]
    body: dict[str, Any] = {
        "name": check_name(name),
        "machineType": f"zones/{zone}/machineTypes/{vm.name}",
        **_properties(request, vm.family, zone, reservation),
        "labels": labels(request, part),
        "metadata": _metadata(
            {**_slot_meta(request), META_WORKER_ID: "0", META_HOSTNAMES: name}
            | boot_metadata(request.startup_script)
        ),
    }
    if request.mode == flex.MODE:
        until = request.valid_until_seconds or FLEX_WAIT
        body["params"] = {"requestValidForDuration": {"seconds": str(until)}}
    return body


def template_body(
    request: CreateRequest, plan: Layout, *, reservation: str | None = None
) -> dict[str, Any]:
    """The global ``InstanceTemplate`` every host of a multi-host slot is made from."""
    _check_window(request)
    vm = machine(request)
    assert plan.template is not None
    return {
        "name": plan.template,
        "description": describe(slot=plan.slot, zone=plan.zone, policy=plan.policy_path),
        "properties": {
            "machineType": vm.name,
            **_properties(request, vm.family, None, reservation),
            # shared by every slice's hosts: no slice index (a host's MIG says it)
            "labels": {k: v for k, v in labels(request, 0).items() if k != LABEL_SLICE},
            "metadata": _metadata(_slot_meta(request) | boot_metadata(request.startup_script)),
        },
    }


def policy_body(request: CreateRequest, plan: Layout) -> dict[str, Any]:
    """The regional workload policy: the slice's topology, all of it interconnected."""
    assert plan.policy is not None
    if not request.topology:
        raise UnsafeName(f"{request.name}: a multi-host slice needs its topology")
    return {
        "name": plan.policy,
        "description": describe(slot=plan.slot, template=plan.template),
        "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": request.topology},
    }


def group_body(project: str, request: CreateRequest, plan: Layout, part: int) -> dict[str, Any]:
    """The zonal MIG of slice ``part``: BULK, DO_NOTHING, the workload policy; no hosts yet
    (``create_instances_body`` names them)."""
    check_project(project)
    assert plan.template is not None and plan.policy_path is not None
    return {
        "name": plan.parts[part],
        "description": describe(
            slot=plan.slot,
            slice=f"{part}/{len(plan.parts)}",
            accelerator=request.accelerator,
            topology=request.topology,
            hosts=plan.hosts,
            mode=request.mode,
            template=plan.template,
            policy=plan.policy_path,
        ),
        "instanceTemplate": f"projects/{project}/global/instanceTemplates/{plan.template}",
        "baseInstanceName": plan.parts[part],
        "targetSize": 0,
        "targetSizePolicy": {"mode": "BULK"},
        "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
        "resourcePolicies": {
            "workloadPolicy": f"projects/{project}/{plan.policy_path}",
        },
    }


def create_instances_body(plan: Layout, part: int) -> dict[str, Any]:
    """``createInstances`` of slice ``part``: every host by name, in worker order, each told
    its worker id and its slice's host names."""
    members = plan.members(plan.parts[part])
    hostnames = ",".join(members)
    return {
        "instances": [
            {
                "name": name,
                "preservedState": {"metadata": {META_WORKER_ID: str(i), META_HOSTNAMES: hostnames}},
            }
            for i, name in enumerate(members)
        ]
    }


__all__ = [
    "API",
    "DISK_GB",
    "FLEX_WAIT",
    "LABEL_ACCELERATOR",
    "LABEL_SLICE",
    "LABEL_SLICES",
    "LABEL_SLOT",
    "LABEL_TOPOLOGY",
    "MARK",
    "Layout",
    "create_instances_body",
    "describe",
    "described",
    "group_body",
    "instance_body",
    "labels",
    "layout",
    "machine",
    "part_names",
    "policy_body",
    "scheduling",
    "template_body",
]
