"""The desired state the planner reads, resolved: ``Desired`` and its ``SlotSpec``s,
``RaceGroupSpec``s, ``SetupSpec``, ``HoldSpec``, ``WorkloadSpec``, ``QuotaSpec`` and
``MemberSpec``: generators expanded, defaults applied, runtime versions chosen, race membership
known. Frozen dataclasses, compared and hashed by value.

The file's schema as written (``DesiredFile``, ``Settings``, ...) is
``model/desired_schema.py``, re-exported here so importers take both layers from one place.
``reconciler.model.load.parse_desired`` turns text into a ``Desired`` (or diagnostics with
``file:line:col``).

Values only: nothing here does I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from reconciler.errors import Diagnostic
from reconciler.model import accelerators, ends, names
from reconciler.model.desired_schema import (
    DEFAULT_IMAGES,
    DEFAULT_RUNTIME_VERSIONS,
    MAX_SLICES,
    Defaults,
    DesiredFile,
    GeneratorModel,
    MemberModel,
    QuotaModel,
    RaceGroupModel,
    Settings,
    Setup,
    SlotModel,
    WorkloadModel,
)
from reconciler.model.ssh_proxy import DIRECT, SshProxy

#: The file's schema lives in ``model.desired_schema``; importers may take it from here.
__all__ = [
    "DEFAULT_IMAGES",
    "DEFAULT_RUNTIME_VERSIONS",
    "MAX_SLICES",
    "NO_HOLD",
    "Defaults",
    "Desired",
    "DesiredFile",
    "GeneratorModel",
    "HoldSpec",
    "MemberModel",
    "MemberSpec",
    "QuotaModel",
    "QuotaSpec",
    "RaceGroupModel",
    "RaceGroupSpec",
    "Settings",
    "Setup",
    "SetupSpec",
    "SlotModel",
    "SlotSpec",
    "WorkloadModel",
    "WorkloadSpec",
]


@dataclass(frozen=True, slots=True)
class SetupSpec:
    bootstrap: bool = False
    tailscale: bool = False
    tmux: bool = True
    generation: int = 0
    scripts: tuple[str, ...] = ()
    telemetry: bool = False
    at_boot: bool = False  # the scripts run from the startup-script metadata on every boot


@dataclass(frozen=True, slots=True)
class HoldSpec:
    """A slot's holds in time and pause (its own keys, else its race group's); epoch seconds."""

    start_at: float | None = None
    start_after_seconds: int | None = None
    hold_for_seconds: float | None = None
    hold_until: float | None = None
    paused: bool = False


NO_HOLD: Final = HoldSpec()


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A slot's resolved workload. ``identity`` changes with what runs (a new run);
    ``policy`` with how failures are handled (lifts a give-up)."""

    command: str | tuple[str, ...]
    workdir: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[tuple[str, str], ...] = ()
    restart: str = "on-preemption"
    max_failures: int = 3
    stall_after: float | None = None
    stop_grace: float = 60.0
    when_done: str = "keep"
    generation: int = 0
    idle_after: float | None = None
    idle_below: float = 1.0
    take_tpu: bool = False
    keep_attempts: int = 5
    before_end: ends.BeforeEndSpec | None = None  # not in identity or policy: no restart

    @property
    def identity(self) -> str:
        what = (self.command, self.workdir, self.env, self.secret_env)
        return hashlib.sha256(repr(what).encode()).hexdigest()[:12]

    @property
    def policy(self) -> str:
        how: tuple[object, ...] = (
            self.restart,
            self.max_failures,
            self.stall_after,
            self.when_done,
        )
        if self.idle_after is not None:  # only when set: the policy of older files stays
            how += (self.idle_after, self.idle_below)
        return hashlib.sha256(repr(how).encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class SlotSpec:
    name: str
    zone: str
    accelerator: str
    mode: str
    runtime_version: str
    want: str | None  # "held" | "released"; None for race candidates (the group decides)
    race_group: str | None = None
    valid_until_seconds: int | None = None
    setup: SetupSpec = field(default_factory=SetupSpec)
    order: int = 0  # position in the file after generation; ties in races break on it
    generated: bool = False
    hold: HoldSpec = NO_HOLD
    workload: WorkloadSpec | None = None
    owner: str | None = None  # its own ``owner:``, else its race group's, else its generator's
    max_run_seconds: int | None = None  # mode flex-start: the run's length
    renew: bool = False  # mode flex-start: queue again after each run's end
    slices: int = 1  # > 1: one multislice QR of this many nodes <name>-0 ... <name>-(N-1)
    #: "tpu" (the TPU API's queued resources) or "compute" (Compute Engine)
    api: str = accelerators.TPU_API
    #: Compute Engine machine type (api "compute" only): ct6e-standard-4t
    machine_type: str | None = None
    #: chips per side of one slice: 2x4, 4x4x4 (the accelerator's default unless chosen)
    topology: str = ""
    #: VMs (SSH workers) of one slice: chips / chips per VM on Compute Engine
    hosts: int = 0
    #: chips of one slice (``slices`` of them in all)
    chips: int = 0
    #: Compute Engine boot image (api "compute" only)
    image: str | None = None
    #: how SSH reaches its workers (its own key, else its generator's, else the settings')
    ssh_proxy: SshProxy = DIRECT

    def __post_init__(self) -> None:
        """A spec made without its shape (tests, older callers) gets the TPU API's."""
        if self.hosts and self.chips and self.topology:
            return
        found = accelerators.lookup(self.accelerator)
        if found is not None:
            gen, chips = found
            shape = accelerators.tpu_api_shape(gen, chips)
            topology, hosts = shape.topology, shape.hosts
        elif names.ACCELERATOR_RE.fullmatch(self.accelerator):  # a family not catalogued
            chips, topology = names.chip_count(self.accelerator), ""
            hosts = names.worker_count(self.accelerator)
        else:
            chips, topology, hosts = 0, "", 0
        object.__setattr__(self, "topology", self.topology or topology)
        object.__setattr__(self, "hosts", self.hosts or hosts)
        object.__setattr__(self, "chips", self.chips or chips)


@dataclass(frozen=True, slots=True)
class RaceGroupSpec:
    name: str
    count: int
    slots: tuple[str, ...]
    paused: bool = False
    owner: str | None = None
    #: ``workload.across: group``: one program over every winner (``core/across.py``); the
    #: candidates themselves then run none
    workload: WorkloadSpec | None = None
    min_count: int | None = None  # winners set up before it runs (None: count)


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """A resolved chip limit: ``place`` is a zone when ``scope`` is "zone", else a region.
    ``source`` is "file" or "cloud" (with the cloud's quota id)."""

    family: str
    mode: str
    scope: str  # "zone" | "region"
    place: str
    chips: int
    source: str = "file"
    quota_id: str | None = None
    api: str = accelerators.TPU_API  # whose quota: each API has its own


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """A member's caps (family -> chips) and priority, as ``members:`` says."""

    name: str
    chips: Mapping[str, int] = field(default_factory=dict)
    priority: int = 0


@dataclass(frozen=True, slots=True)
class Desired:
    project: str
    settings: Settings
    slots: tuple[SlotSpec, ...]
    race_groups: tuple[RaceGroupSpec, ...] = ()
    source: str = "desired.yaml"
    digest: str = ""  # sha256 of the text it was parsed from
    quotas: tuple[QuotaSpec, ...] = ()
    members: tuple[MemberSpec, ...] = ()
    #: what ``validate`` says about a valid file: an accelerator written in Google's spelling
    #: and the name it is sent as (``file:line:col: note: ...``)
    notes: tuple[Diagnostic, ...] = field(default=(), compare=False)
    _by_name: Mapping[str, SlotSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {s.name: s for s in self.slots})

    def slot(self, name: str) -> SlotSpec | None:
        return self._by_name.get(name)

    @property
    def zones(self) -> frozenset[str]:
        return frozenset(s.zone for s in self.slots)

    def zone_code(self, zone: str) -> str:
        return self.settings.zone_codes.get(zone) or names.zone_code(zone)
