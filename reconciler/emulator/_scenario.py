"""Scenario files for the emulator: capacity over time, preemptions, faults, latencies.

Values only: parsing YAML text into a validated ``Scenario`` and the ``Fault`` value. No I/O
except ``Scenario.load`` reading the one file it is given; no clock, no server.

Every time (``at``, ``until``, timings) is in *emulated* seconds from the emulator's start
(``30``, ``"30s"``, ``"2m"``, ``"1h"``); the emulator's speed factor decides how fast they pass.
Latencies are *real* seconds (they exist to exercise client timeouts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from reconciler.emulator._compute_catalog import MACHINE_TYPES
from reconciler.model.durations import parse_duration
from reconciler.model.names import ACCELERATOR_RE, NAME_RE, ZONE_RE
from reconciler.model.rpc_codes import HTTP_OF_STATUS, RPC_CODES, status_of_http
from reconciler.model.vocabulary import DEFAULT_MODE, Mode

#: Google canonical status names and the HTTP status each is served with (``model.rpc_codes``,
#: the controller's table too).
STATUS_HTTP: Final = HTTP_OF_STATUS
#: google.rpc.Code numbers (used in ``failedData.error`` and operation errors).
RPC_CODE: Mapping[str, int] = RPC_CODES


class ScenarioError(ValueError):
    """A scenario that does not parse or validate; the message says where."""


@dataclass(frozen=True, slots=True)
class Fault:
    """An injected failure for the next ``count`` requests matching ``method`` and ``path``.

    ``status`` is an HTTP status (429, 503, 403, ...) or a Google status name
    (``"ALREADY_EXISTS"``); ``None`` injects only ``latency`` and lets the request through.
    ``path`` is a regular expression searched in the URL path. ``body`` replaces Google's
    error JSON with raw text (garbage JSON, an HTML page). ``count`` None hits every match.
    ``latency`` is real seconds slept before answering.
    """

    status: int | str | None = 429
    method: str | None = None
    path: str | None = None
    count: int | None = 1
    latency: float = 0.0
    body: bytes | str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.status, str) and self.status.upper() not in STATUS_HTTP:
            raise ValueError(f"unknown status name {self.status!r}")
        if isinstance(self.status, int) and not 100 <= self.status <= 599:
            raise ValueError(f"HTTP status out of range: {self.status}")

    @property
    def http_status(self) -> int | None:
        if self.status is None:
            return None
        if isinstance(self.status, str):
            return STATUS_HTTP[self.status.upper()]
        return self.status

    @property
    def status_name(self) -> str | None:
        if self.status is None:
            return None
        if isinstance(self.status, str):
            return self.status.upper()
        return status_of_http(self.status) or "UNKNOWN"


def _seconds(value: object) -> float:
    if value == 0 or value == "0":
        return 0.0
    return parse_duration(value)


def _matching(pattern: re.Pattern[str], example: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"expected something like {example}, got {value!r}")
        return value

    return AfterValidator(check)


Seconds = Annotated[float, BeforeValidator(_seconds)]
Zone = Annotated[str, _matching(ZONE_RE, "us-central2-b")]
Accelerator = Annotated[str, _matching(ACCELERATOR_RE, "v4-8")]
Name = Annotated[str, _matching(NAME_RE, "my-tpu-1")]
PosixUser = Annotated[str, _matching(re.compile(r"[a-z_][a-z0-9_.-]{0,31}"), "demo_user")]


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timings(_Base):
    """How long each step takes, in emulated seconds."""

    accept: Seconds = 1.0  # CREATING -> ACCEPTED (the create operation finishes here)
    provision: Seconds = 2.0  # ACCEPTED -> PROVISIONING, or WAITING_FOR_RESOURCES if no capacity
    activate: Seconds = 5.0  # PROVISIONING -> ACTIVE (node CREATING -> READY)
    delete: Seconds = 3.0  # DELETING -> gone
    suspend: Seconds = 0.0  # SUSPENDING -> SUSPENDED after a preemption


class ComputeTimings(_Base):
    """How long each Compute Engine step takes, in emulated seconds."""

    operation: Seconds = 1.0  # an operation with nothing else to wait for is DONE after this
    provision: Seconds = 2.0  # instance PROVISIONING -> STAGING
    stage: Seconds = 3.0  # STAGING -> RUNNING (an insert's or a start's operation is DONE then)
    stop: Seconds = 2.0  # STOPPING -> TERMINATED
    delete: Seconds = 3.0  # a deleted instance: STOPPING -> gone
    policy: Seconds = 1.0  # a resource policy: CREATING -> READY
    activate: Seconds = 2.0  # a MIG's accelerator topology: ACTIVATING -> ACTIVE


class ComputeCapacityChange(_Base):
    """From ``at`` on, at most ``count`` VMs of ``machine_type`` (a Compute Engine TPU machine
    type) hold capacity in ``zone``; null: unlimited (the default for every pair)."""

    at: Seconds = 0.0
    zone: Zone
    machine_type: str
    count: int | None = Field(default=None, ge=0)

    def model_post_init(self, _context: Any) -> None:
        if self.machine_type not in MACHINE_TYPES:
            known = ", ".join(sorted(MACHINE_TYPES))
            raise ValueError(f"machine_type must be one of {known}, not {self.machine_type!r}")


class CapacityChange(_Base):
    """From ``at`` on, ``count`` slices of ``accelerator`` may hold capacity in ``zone``.

    ``count`` null means unlimited. ``shortage`` says what a QR does when none is free:
    ``wait`` (WAITING_FOR_RESOURCES) or ``fail`` (FAILED with code 8 RESOURCE_EXHAUSTED).
    """

    at: Seconds = 0.0
    zone: Zone
    accelerator: Accelerator
    count: int | None = Field(default=None, ge=0)
    shortage: Literal["wait", "fail"] | None = None


class Preemption(_Base):
    at: Seconds = 0.0
    zone: Zone
    node: Name


class ScheduledFault(_Base):
    at: Seconds = 0.0
    status: int | str | None = 429
    method: str | None = None
    path: str | None = None
    count: int | None = 1
    latency: float = Field(default=0.0, ge=0)
    body: str | None = None

    def fault(self) -> Fault:
        return Fault(
            status=self.status,
            method=self.method,
            path=self.path,
            count=self.count,
            latency=self.latency,
            body=self.body,
        )


class OperationFailure(_Base):
    """Creates (or deletes) matching ``zone`` / ``name`` (a regular expression, full match)
    are accepted with an operation that finishes ``after`` emulated seconds later with
    ``status`` and ``message``, as the real API reports capacity and validation errors after
    the first reply. A failed create leaves no QR; a failed delete leaves the QR as it was.
    ``count`` null: every match, else that many requests."""

    verb: Literal["create", "delete"] = "create"
    zone: Zone | None = None
    name: str | None = None
    status: str = "INVALID_ARGUMENT"
    message: str = "the request was refused after it was accepted"
    after: Seconds = 1.0
    count: int | None = Field(default=None, ge=1)

    def model_post_init(self, _context: Any) -> None:
        if self.status.upper() not in RPC_CODE:
            raise ValueError(f"unknown status name {self.status!r}")
        if self.name is not None:
            re.compile(self.name)


class LatencyChange(_Base):
    at: Seconds = 0.0
    seconds: float = Field(ge=0)


class ScenarioQueuedResource(_Base):
    """A queued resource that appears at ``at``: created like a user's, or placed in ``state``."""

    at: Seconds = 0.0
    name: Name
    zone: Zone
    accelerator: Accelerator = "v4-8"
    runtime_version: str = "tpu-ubuntu2204-base"
    mode: Mode = DEFAULT_MODE
    labels: dict[str, str] = Field(default_factory=dict)
    node_id: Name | None = None  # with slices > 1: the nodes' prefix
    slices: int = Field(1, ge=1, le=64)  # > 1: a multislice QR of this many nodes
    state: (
        Literal[
            "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE", "SUSPENDED", "FAILED"
        ]
        | None
    ) = None
    valid_until: Seconds | None = None
    #: mode flex-start (required there): the run's length once ACTIVE, at most 7d.
    max_run_duration: Seconds | None = None

    def model_post_init(self, _context: Any) -> None:
        flex = self.mode == "flex-start"
        if flex and not 0 < (self.max_run_duration or 0) <= 7 * 86400:
            raise ValueError("mode flex-start needs max_run_duration (at most 7d)")
        if not flex and self.max_run_duration is not None:
            raise ValueError(f"max_run_duration needs mode flex-start, not {self.mode}")


class Unreachable(_Base):
    """``zone`` is missing from ``locations/-`` lists (named in ``unreachable[]``) and answers
    503 when asked directly, from ``at`` until ``until`` (null: for good)."""

    at: Seconds = 0.0
    zone: Zone
    until: Seconds | None = None


class Scenario(_Base):
    """A story for the emulator. Every field is optional; an empty scenario is a quiet cloud
    with unlimited capacity."""

    speed: float | None = Field(default=None, ge=0)
    page_size: int | None = Field(default=None, ge=1)
    ip_pool: list[str] | None = None
    timings: Timings = Field(default_factory=Timings)
    default_capacity: int | None = Field(default=None, ge=0)
    fail_deletes_while_provisioning: bool = False
    operation_failures: list[OperationFailure] = Field(default_factory=list)
    capacity: list[CapacityChange] = Field(default_factory=list)
    preemptions: list[Preemption] = Field(default_factory=list)
    faults: list[ScheduledFault] = Field(default_factory=list)
    latency: list[LatencyChange] = Field(default_factory=list)
    queued_resources: list[ScenarioQueuedResource] = Field(default_factory=list)
    unreachable: list[Unreachable] = Field(default_factory=list)
    #: The Compute Engine side: its step timings and capacity changes.
    compute_timings: ComputeTimings = Field(default_factory=ComputeTimings)
    compute_capacity: list[ComputeCapacityChange] = Field(default_factory=list)
    #: The POSIX user name of the OS Login profile every caller gets (``describe-profile``).
    os_login_user: PosixUser = "demo_user"

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "<scenario>") -> Scenario:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            data: Any = YAML(typ="safe", pure=True).load(text)
        except YAMLError as exc:
            raise ScenarioError(f"{source}: not valid YAML: {exc}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ScenarioError(f"{source}: a scenario is a mapping of sections")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ScenarioError(f"{source}: {problems}") from None

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        p = Path(path)
        return cls.from_yaml(p.read_text(encoding="utf-8"), source=str(p))
