"""The status snapshot (``tpu-reconciler.status.v1``) as typed values, and its JSON form.

The controller writes one snapshot after every pass (``status.json``); ``status``, ``status
--watch``, ``tmux status``, ``doctor``, the MCP views and the intent's tmux notes read it. They
all use these classes: ``core/status.build_status`` makes a ``StatusSnapshot``,
``adapters/status_file`` reads and writes the file, and nothing else parses the JSON.

May: define frozen values and convert them to and from JSON-ready dicts (pure).
May not: do I/O, import anything beyond the standard library (``status`` imports this on its
fast path).

JSON rules (``to_json`` / ``from_json`` are driven by the dataclass fields, in field order):

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

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

STATUS_SCHEMA: Final = "tpu-reconciler.status.v1"

_ADDED: Final = "added"
_NOTHING: Final = object()
T = TypeVar("T")


def added(default: Any = None) -> Any:
    """A field added after v1 was fixed: omitted from the JSON while it equals ``default``."""
    return field(default=default, metadata={_ADDED: True})


def _extra() -> Any:
    return field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    running: bool = False
    pid: int | None = None
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class DesiredInfo:
    file: str | None = None
    valid: bool = False
    errors: tuple[str, ...] = ()
    digest: str | None = None
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class SetupStatus:
    """Per slot: ``off | waiting | pending | done | failed`` for each setup step."""

    bootstrap: str | None = None
    tailscale: str | None = None
    generation: int = 0
    detail: str | None = None
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class TmuxStatus:
    """Per slot: the window the mirror keeps (None when the slot does not want one)."""

    target: str | None = None
    open: bool = False
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class SlotStatus:
    """One row: a managed slot (``setup``/``tmux`` set) or an unmanaged QR (they are None)."""

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
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class RaceGroupStatus:
    name: str
    count: int = 0
    winners: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    open: bool = False
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class ActionStatus:
    symbol: str = ""
    kind: str = ""
    slot: str = ""
    zone: str = ""
    reason: str = ""
    destructive: bool = False
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class DeferredActionStatus(ActionStatus):
    """An action the planner holds back until ``until`` (ISO time, None = no set time)."""

    why: str = ""
    until: str | None = None


@dataclass(frozen=True, slots=True)
class BlockedActionStatus(ActionStatus):
    """An action the planner refuses to take (needs an explicit intent)."""

    why: str = ""


@dataclass(frozen=True, slots=True)
class PlanStatus:
    summary: str = ""
    actions: tuple[ActionStatus, ...] = ()
    deferred: tuple[DeferredActionStatus, ...] = ()
    blocked: tuple[BlockedActionStatus, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
class TmuxInventoryStatus:
    """The snapshot's top-level ``tmux``: every ``tpu-*`` window, and the orphaned ones."""

    windows: tuple[str, ...] = ()
    orphans: tuple[str, ...] = ()
    extra: Mapping[str, Any] = _extra()


@dataclass(frozen=True, slots=True)
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
    extra: Mapping[str, Any] = _extra()

    def slot(self, name: str) -> SlotStatus | None:
        return next((s for s in self.slots if s.name == name), None)

    def by_name(self) -> dict[str, SlotStatus]:
        return {s.name: s for s in self.slots}

    def active(self) -> frozenset[str]:
        return frozenset(s.name for s in self.slots if s.state == "ACTIVE")


# --- the generic codec -------------------------------------------------------------------------
# Compiled once per class from its fields and type hints. Plain fields (str, int, bool, None)
# are copied as they are; only fields holding tuples or nested dataclasses get a converter, so
# decoding 1,000 slots stays a few dict operations per row.

_Convert = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Spec:
    known: frozenset[str]  # every JSON key a field reads (all fields but ``extra``)
    decode: tuple[tuple[str, _Convert], ...]  # fields that need converting on the way in
    encode: tuple[tuple[str, _Convert | None, Any], ...]  # (name, converter, added-default)


_SPECS: dict[type, _Spec] = {}


def _object(cls: type[T]) -> _Convert:
    def decode(value: Any) -> T:
        return decode_as(cls, value)

    return decode


def _tuple_of(item: _Convert | None) -> _Convert:
    def decode(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list, got {type(value).__name__}")
        return tuple(value) if item is None else tuple(item(v) for v in value)

    return decode


def _optional(inner: _Convert) -> _Convert:
    def decode(value: Any) -> Any:
        return None if value is None else inner(value)

    return decode


def _encode_list(value: Any) -> Any:
    if value is None:
        return None
    return [encode(v) if hasattr(v, "__dataclass_fields__") else v for v in value]


def _encode_object(value: Any) -> Any:
    return None if value is None else encode(value)


def _converters(hint: Any) -> tuple[_Convert | None, _Convert | None]:
    """(decoder, encoder) for a field's type hint; None for a plain JSON value."""
    args = typing.get_args(hint)
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        optional = len(rest) < len(args)
        hint = rest[0] if len(rest) == 1 else Any
        args = typing.get_args(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        decode, out = _object(hint), _encode_object
    elif typing.get_origin(hint) is tuple:
        of = args[0] if args else Any
        nested = isinstance(of, type) and dataclasses.is_dataclass(of)
        decode, out = _tuple_of(_object(of) if nested else None), _encode_list
    else:
        return None, None
    return (_optional(decode) if optional else decode), out


def _spec(cls: type) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        hints = typing.get_type_hints(cls, vars(sys.modules[__name__]))
        fields = [f for f in dataclasses.fields(cls) if f.name != "extra"]
        decode: list[tuple[str, _Convert]] = []
        encode_: list[tuple[str, _Convert | None, Any]] = []
        for f in fields:
            into, out = _converters(hints[f.name])
            if into is not None:
                decode.append((f.name, into))
            encode_.append((f.name, out, f.default if f.metadata.get(_ADDED) else _NOTHING))
        spec = _Spec(frozenset(f.name for f in fields), tuple(decode), tuple(encode_))
        _SPECS[cls] = spec
    return spec


def decode_as(cls: type[T], data: Any) -> T:
    """``data`` (a JSON object) as a ``cls``; see the module docstring for the rules."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    spec = _spec(cls)
    if data.keys() <= spec.known:
        kwargs = dict(data)
    else:
        kwargs = {k: v for k, v in data.items() if k in spec.known}
        kwargs["extra"] = {k: v for k, v in data.items() if k not in spec.known}
    for name, convert in spec.decode:
        if name in kwargs:
            kwargs[name] = convert(kwargs[name])
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field (a slot's name) is missing
        raise ValueError(f"{cls.__name__}: {e}") from None


def encode(obj: Any) -> dict[str, Any]:
    """A status dataclass as a JSON-ready dict (keys in field order, then ``extra``)."""
    out: dict[str, Any] = {}
    for name, convert, default in _spec(type(obj)).encode:
        value = getattr(obj, name)
        if default is not _NOTHING and value == default:
            continue
        out[name] = value if convert is None else convert(value)
    extra: Mapping[str, Any] = obj.extra
    if extra:
        out.update(extra)
    return out


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
