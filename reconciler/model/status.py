"""The status snapshot (``tpu-reconciler.status.v1``) as typed values, and its JSON form.

The controller writes one snapshot after every pass (``status.json``); ``status``, ``status
--watch``, ``tmux status``, ``doctor``, the MCP views and the intent's tmux notes read it. They
all use these classes: ``core/status.build_status`` makes a ``StatusSnapshot``,
``adapters/status_file`` reads and writes the file, and nothing else parses the JSON.

May: define frozen values and convert them to and from JSON-ready dicts (pure).
May not: do I/O, or import anything beyond the standard library (``status`` imports this).
The classes are plain frozen dataclasses; copy one with ``dataclasses.replace``.

JSON rules (``to_json`` / ``from_json``, one small codec driven by the dataclass fields):

- Keys appear in field order, so the field order *is* the on-disk key order (the golden test
  ``tests/integration/test_golden.py`` holds it byte-compatible). Tuples become lists and back.
- A field declared with plain ``= None`` / ``= ()`` is part of v1 as it always was: it is
  always written (``null`` / ``[]`` included).
- A field added later is declared with ``= added()`` (default None) or ``added(default)``: it is
  written only when its value differs from that default, so snapshots without the feature stay
  byte-identical to what older controllers wrote. Adding an optional field is one line here;
  nested dataclass / tuple-of-dataclass fields are decoded from their type hints.
- Reading is tolerant: a missing key takes the field's default, a key no field knows is kept in
  ``extra`` and written back after the known keys (a newer controller's additions survive a
  round trip). Reading is strict about ``schema_version`` and about shapes the readers rely on
  (an object where an object belongs, a list where a list belongs, a slot ``name``):
  ``from_json`` raises ``ValueError`` otherwise.
"""

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, Final, TypeVar

STATUS_SCHEMA: Final = "tpu-reconciler.status.v1"

_ADDED: Final = "added"
T = TypeVar("T")


def added(default: Any = None) -> Any:
    """A field added after v1 was fixed: omitted from the JSON while it equals ``default``."""
    return field(default=default, metadata={_ADDED: True})


def _extra() -> Any:
    """The JSON keys no field knows, in their order: compared, but neither hashed nor shown."""
    return field(default_factory=dict, repr=False, hash=False)


@dataclass(frozen=True)
class ControllerInfo:
    """Whether a controller holds the lock, and its pid (0: running, pid not yet known)."""

    running: bool = False
    pid: int | None = None
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class DesiredInfo:
    """The desired file the snapshot was made from: valid or not (its errors), its digest."""

    file: str | None = None
    valid: bool = False
    errors: tuple[str, ...] = ()
    digest: str | None = None
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class BootStatus:
    """``setup.at_boot``: what each worker's boot script reported for ``generation``."""

    generation: int = 0
    workers: tuple[str, ...] = ()  # done | running | failed | waiting, worker 0 first
    detail: str = ""  # a failed worker's words
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class SetupStatus:
    """Per slot: ``off | waiting | pending | running | done | failed`` for each setup step
    (``running``: at boot)."""

    bootstrap: str | None = None
    tailscale: str | None = None
    generation: int = 0
    detail: str | None = None
    at_boot: BootStatus | None = added()  # the node's boot script runs the setup
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class BeforeEndStatus:
    """``workload.before_end``: the next known end, when the command runs before it
    (``runs_at``), and how the last run went. ``state``: scheduled | due | ran | failed
    (the last try, retried until the end) | waiting (no running attempt to run it for)."""

    end: str = ""  # maintenance | flex-start | termination | hold_until | hold_for
    at: str | None = None  # the end, UTC
    runs_at: str | None = None
    state: str = ""
    last: str = ""  # "ran on 4 workers before flex-start at 2026-...", the error when failed
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class TmuxStatus:
    """Per slot: the window the mirror keeps (None when the slot does not want one)."""

    target: str | None = None
    open: bool = False
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class SlotQuotaStatus:
    """Why a slot's create is not sent: ``state`` "waiting" (it would pass a limit: the
    ``message`` says "waiting for quota: 64/64 spot v6e chips in europe-west4-a"),
    "refused" (the cloud refused it for quota: its words, and the quota id and limit) or
    "never-fits" (it asks for more chips than the limit, or its owner's cap, allows at all:
    "never fits: needs 32, limit 16 ...")."""

    state: str = ""
    message: str = ""
    quota_id: str | None = None
    limit: int | None = None
    place: str | None = None
    extra: Mapping[str, Any] = _extra()
    api: str | None = added()  # whose quota: "tpu" (the TPU API) or "compute"
    needs: int | None = added()  # the chips its create asks for


@dataclass(frozen=True)
class QuotaStatus:
    """A chip limit (the file's ``quotas:`` or the cloud's), the chips counted under it, and
    the slots whose create waits on it."""

    family: str = ""
    mode: str = ""
    scope: str = ""  # "zone" | "region"
    place: str = ""
    chips: int = 0
    used: int = 0
    waiting: tuple[str, ...] = ()
    source: str = "file"
    quota_id: str | None = None
    extra: Mapping[str, Any] = _extra()
    api: str | None = added()  # whose limit: "tpu" (the TPU API) or "compute"


@dataclass(frozen=True)
class ExpectedWaitStatus:
    """Per waiting slot, from the capacity history: the median time from queued to ACTIVE in
    its zone, accelerator and mode, and how many requests that figure stands on."""

    p50_seconds: float | None = None
    samples: int = 0
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class ChipStatus:
    """One chip of a worker (``setup.telemetry``); a figure not read is null (unknown)."""

    index: int = 0
    duty_cycle: float | None = None  # TensorCore duty cycle, percent
    hbm_used: int | None = None  # bytes
    hbm_total: int | None = None  # bytes
    holders: tuple[int, ...] = ()  # pids with the chip's device file open
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class WorkerStatus:
    """One worker of a workload's attempt, as the last probe saw it."""

    index: int = 0
    state: str = "unknown"  # alive | exited | missing | unknown
    exit_code: int | None = None
    extra: Mapping[str, Any] = _extra()
    chips: tuple[ChipStatus, ...] = added(())


@dataclass(frozen=True)
class WorkloadStatus:
    """Per slot: its workload's run and attempt. ``state`` is one of pending, starting,
    running, succeeded, failed, stopping, interrupted, gave-up, released, not-started,
    unknown."""

    state: str = "pending"
    run_id: str | None = None
    attempt: int = 0
    failures: int = 0
    max_failures: int | None = None
    since: str | None = None
    workers: tuple[WorkerStatus, ...] = ()
    last_lines: tuple[str, ...] = ()
    detail: str = ""  # why it failed / gave up / was interrupted / released / never started
    summary: str = ""  # the status table's cell, e.g. "running 2h13m · attempt 3"
    restart_at: str | None = added()  # a relaunch held back by the restart backoff goes then
    extra: Mapping[str, Any] = _extra()
    tpu: str = added("")  # the least busy worker's chips: "TPU 97% · HBM 28/32 GiB"


@dataclass(frozen=True)
class SymptomStatus:
    """One of the node's ``symptoms[]`` (``kind`` is the API's ``symptomType``)."""

    kind: str = ""
    worker: str | None = None
    details: str = ""
    create_time: str | None = None
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class MaintenanceStatus:
    """The node's ``upcomingMaintenance``: SCHEDULED / UNSCHEDULED, PENDING / ONGOING."""

    kind: str | None = None
    status: str | None = None
    window_start: str | None = None
    window_end: str | None = None
    can_reschedule: bool | None = None
    command: str | None = added()  # with can_reschedule: the command that starts it now
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class SliceStatus:
    """One slice of a multislice slot: its node, state and workers' addresses."""

    index: int = 0
    node: str = ""
    state: str | None = None
    workers: int = 0
    ips: tuple[str, ...] = ()
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class SlotStatus:
    """One row: a managed slot (``setup``/``tmux`` set) or an unmanaged request (they are
    None)."""

    name: str
    zone: str | None = None
    accelerator: str | None = None
    mode: str | None = None
    want: str | None = None
    managed: bool | None = None
    race_group: str | None = None
    state: str | None = None
    node_state: str | None = None
    health: str | None = None
    ips: tuple[str, ...] = ()
    create_time: str | None = None
    labelled: bool | None = None
    state_since: str | None = None
    last_error: str | None = None
    setup: SetupStatus | None = None
    tmux: TmuxStatus | None = None
    instance: str | None = None
    paused: bool = added(False)  # paused: true on the slot or its race group
    releases_at: str | None = added()  # when hold_for / hold_until releases it (UTC)
    workload: WorkloadStatus | None = added()
    # waiting for capacity, with 3+ samples of history
    expected_wait: ExpectedWaitStatus | None = added()
    quota: SlotQuotaStatus | None = added()  # its create waits for, or was refused, quota
    # round trip to the slot's zone (TCP connect to a held node's SSH port); None: none held
    latency_ms: float | None = added()
    owner: str | None = added()  # the Unix user who holds it (desired.yaml ``owner:``)
    # flex-start: when the run ends (terminationTime, UTC), and whether it has ended
    ends_at: str | None = added()
    expired: bool = added(False)
    # the node's own signals, shown and never acted on; ``health_note`` says what to do
    symptoms: tuple[SymptomStatus, ...] = added(())
    maintenance: MaintenanceStatus | None = added()
    health_note: str | None = added()
    slices: tuple[SliceStatus, ...] = added(())  # multislice: one per slice, slice 0 first
    #: the request's neutral state (``model/capacity.RequestState``: waiting, active, ...)
    #: beside ``state``, the API's own word; None: no request seen
    request: str | None = added()
    before_end: BeforeEndStatus | None = added()  # its workload's before_end and next end
    extra: Mapping[str, Any] = _extra()
    #: the API that holds (or is to hold) it: "tpu" (queued resources) or "compute" (Compute
    #: Engine); None in a snapshot written before it said
    api: str | None = added()

    @property
    def active(self) -> bool:
        """Its request holds capacity (a snapshot older than ``request`` says so in
        ``state``)."""
        return self.request == "active" if self.request is not None else self.state == "ACTIVE"


@dataclass(frozen=True)
class RaceGroupStatus:
    """A race: ``count`` winners wanted among ``candidates``; ``open`` while short."""

    name: str
    count: int = 0
    winners: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    open: bool = False
    paused: bool = added(False)
    #: ``workload.across: group``: the one program over its winners (None: none)
    workload: WorkloadStatus | None = added()
    instance: str | None = added()  # its program's virtual node (``core/across``), for ``logs``
    ips: tuple[str, ...] = added(())  # that node's workers, first winner's worker 0 first
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class ActionStatus:
    """One planned action, as ``plan`` shows it (``symbol`` is ``+``, ``-``, ``-/+``, ``~``)."""

    symbol: str = ""
    kind: str = ""
    slot: str = ""
    zone: str = ""
    reason: str = ""
    destructive: bool = False
    #: a warning shown beside it, e.g. "zone not known to offer v6e-8" on a create
    note: str = added("")
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class DeferredActionStatus(ActionStatus):
    """An action the planner holds back until ``until`` (ISO time, None = no set time)."""

    why: str = ""
    until: str | None = None


@dataclass(frozen=True)
class BlockedActionStatus(ActionStatus):
    """An action the planner refuses to take (needs an explicit intent)."""

    why: str = ""


@dataclass(frozen=True)
class HeldActionStatus(ActionStatus):
    """An action held back at the user's word: ``rule`` is ``paused``, ``guard`` or
    ``suspended`` (see ``core/control``)."""

    why: str = ""
    rule: str | None = None


@dataclass(frozen=True)
class GuardStatus:
    """Deletes of ACTIVE TPUs the delete guard holds; ``command`` confirms exactly these."""

    limit: int = 0
    deletes: tuple[str, ...] = ()  # "zone/slot@uid"
    slots: tuple[str, ...] = ()
    fingerprint: str = ""
    command: str = ""
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class PlanStatus:
    """The pending plan: its summary line, the actions, and what is deferred or blocked."""

    summary: str = ""
    actions: tuple[ActionStatus, ...] = ()
    deferred: tuple[DeferredActionStatus, ...] = ()
    blocked: tuple[BlockedActionStatus, ...] = ()
    warnings: tuple[str, ...] = ()
    held: tuple[HeldActionStatus, ...] = added(())  # paused, guarded, suspended
    guard: GuardStatus | None = added()
    suspended: bool = added(False)
    ended: tuple[str, ...] = added(())  # flex-start runs over and not queued again: why
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class TmuxInventoryStatus:
    """The snapshot's top-level ``tmux``: every ``tpu-*`` window, and the orphaned ones."""

    windows: tuple[str, ...] = ()
    orphans: tuple[str, ...] = ()
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True)
class StatusSnapshot:
    """The whole document. ``controller`` is filled from the lock by readers; ``in_flight`` is
    only in the controller's own snapshot, ``note`` only in one made without a controller."""

    generated_at: str | None = None
    controller: ControllerInfo = ControllerInfo()
    backend: str | None = None
    desired: DesiredInfo = DesiredInfo()
    observed_at: str | None = None
    observe_error: str | None = None
    unreachable_zones: tuple[str, ...] = ()
    slots: tuple[SlotStatus, ...] = ()
    race_groups: tuple[RaceGroupStatus, ...] = ()
    plan: PlanStatus | None = None
    tmux: TmuxInventoryStatus = TmuxInventoryStatus()
    in_flight: tuple[str, ...] | None = added()
    note: str | None = added()
    suspended: bool = added(False)  # settings.suspend: observing and planning, not acting
    history_error: str | None = added()  # the capacity history store's last failure
    quotas: tuple[QuotaStatus, ...] = added(())  # chip limits, their use and who waits
    extra: Mapping[str, Any] = _extra()

    def slot(self, name: str) -> SlotStatus | None:
        return next((s for s in self.slots if s.name == name), None)

    def by_name(self) -> dict[str, SlotStatus]:
        return {s.name: s for s in self.slots}

    def active(self) -> frozenset[str]:
        return frozenset(s.name for s in self.slots if s.active)


# --- the codec ---------------------------------------------------------------------------------
# Worked out once per class from its fields and type hints: which keys the fields read, their
# defaults, which fields were added after v1 (left out while at their default), and how the few
# fields holding tuples or nested dataclasses convert. Plain fields (str, int, bool, None) are
# taken as they are.

_Convert = Callable[[Any], Any]
_NOTHING: Final = object()  # a required field's place in a class's template of defaults


class _Codec:
    """How one dataclass is read from and written to JSON."""

    __slots__ = ("added", "cls", "decoders", "encoders", "known", "template")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        own = [f for f in fields(cls) if f.name != "extra"]
        self.known = frozenset(f.name for f in own)  # the JSON keys the fields read
        # every field with its default (_NOTHING: required): what a decoded value starts from
        self.template = {f.name: _NOTHING if f.default is MISSING else f.default for f in own}
        self.added = tuple((f.name, f.default) for f in own if f.metadata.get(_ADDED))
        # (name, decoder, None allowed) and (name, encoder) of the fields needing conversion
        self.decoders: list[tuple[str, _Convert, bool]] = []
        self.encoders: list[tuple[str, _Convert]] = []
        for f in own:
            optional, decoder, encoder = _converters(f.type)  # a type: no __future__ here
            if decoder is not None and encoder is not None:
                self.decoders.append((f.name, decoder, optional))
                self.encoders.append((f.name, encoder))

    def decode(self, data: Any) -> Any:
        """The value of a JSON object. Its fields are set as one dict (the template of
        defaults updated with ``data``) rather than one by one through the frozen
        ``__init__``: a 1,000-slot snapshot decodes in 47 M instructions instead of 111 M.
        The result equals ``cls(**fields)``."""
        if type(data) is not dict:
            raise ValueError(f"{self.cls.__name__}: expected an object, got {type(data).__name__}")
        values = self.template.copy()
        values.update(data)
        if len(values) == len(self.template):
            extra = {}
        else:  # keys no field knows: kept aside, in their order
            extra = {k: values.pop(k) for k in data if k not in self.known}
        if _NOTHING in values.values():
            missing = next(k for k, v in values.items() if v is _NOTHING)
            raise ValueError(f"{self.cls.__name__}: {missing!r} is missing")
        for name, decoder, optional in self.decoders:
            if name in data and (values[name] is not None or not optional):
                values[name] = decoder(values[name])
        values["extra"] = extra
        obj: Any = object.__new__(self.cls)
        obj.__dict__.update(values)
        return obj

    def encode(self, obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = obj.__dict__.copy()  # every field, in field order
        extra: Mapping[str, Any] = out.pop("extra")
        for name, default in self.added:
            if out[name] == default:
                del out[name]
        for name, encoder in self.encoders:
            if name in out and out[name] is not None:
                out[name] = encoder(out[name])
        if extra:
            out.update(extra)
        return out


_CODECS: dict[type, _Codec] = {}


def _codec(cls: type) -> _Codec:
    codec = _CODECS.get(cls)
    if codec is None:
        codec = _CODECS[cls] = _Codec(cls)
    return codec


def _tuple_of(item: _Convert | None) -> _Convert:
    def decode(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list, got {type(value).__name__}")
        return tuple(value) if item is None else tuple([item(v) for v in value])

    return decode


def _converters(hint: Any) -> tuple[bool, _Convert | None, _Convert | None]:
    """(None allowed, decoder, encoder) for a field's type hint; no coders for a plain value."""
    args = typing.get_args(hint)
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        optional = len(rest) < len(args)
        hint = rest[0] if len(rest) == 1 else Any
        args = typing.get_args(hint)
    if isinstance(hint, type) and is_dataclass(hint):
        return optional, _codec(hint).decode, encode
    if typing.get_origin(hint) is tuple:
        of = args[0] if args else Any
        if isinstance(of, type) and is_dataclass(of):
            return optional, _tuple_of(_codec(of).decode), lambda v: [encode(x) for x in v]
        return optional, _tuple_of(None), list
    return optional, None, None


def decode_as(cls: type[T], data: Any) -> T:
    """``data`` (a JSON object) as a ``cls``; see the module docstring for the rules."""
    decoded: T = _codec(cls).decode(data)
    return decoded


def encode(obj: Any) -> dict[str, Any]:
    """A status value as a JSON-ready dict (keys in field order, then ``extra``'s)."""
    return _codec(type(obj)).encode(obj)


def to_json(snapshot: StatusSnapshot) -> dict[str, Any]:
    """The snapshot as the v1 JSON document (``schema_version`` first)."""
    return {"schema_version": STATUS_SCHEMA, **encode(snapshot)}


def from_json(doc: Any) -> StatusSnapshot:
    """Parse a v1 document; ``ValueError`` on another schema or a shape readers cannot use."""
    if not isinstance(doc, dict):
        raise ValueError("the status document is not a JSON object")
    schema = doc.get("schema_version")
    if schema != STATUS_SCHEMA:
        raise ValueError(f"unknown schema {schema!r} (expected {STATUS_SCHEMA})")
    return decode_as(StatusSnapshot, {k: v for k, v in doc.items() if k != "schema_version"})
