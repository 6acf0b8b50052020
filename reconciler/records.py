"""Frozen record classes without the ``dataclasses`` module, for what ``status`` imports.

``tpu-reconciler status`` is run in loops, in prompts and by scripts, so its start counts.
Importing ``dataclasses`` (it imports ``inspect``, and that ``ast``, ``dis``, ``tokenize``...)
and letting it compile ``__init__``, ``__setattr__`` and ``__delattr__`` for each frozen class
cost ~80 M instructions of a ~360 M ``status``: more than parsing a 1,000-slot snapshot. So the
classes on that path (``model/status``, ``errors.Diagnostic``, ``adapters/statedir.StateDir``)
are declared with this module's names instead of ``dataclasses``'::

    from reconciler.records import field, record, replace

    @record(frozen=True)
    class Point:
        x: int
        y: int = 0
        tags: dict[str, str] = field(default_factory=dict)

**For the type checker these are dataclasses'**: ``record`` is ``dataclasses.dataclass``, and
``field``, ``fields``, ``replace``, ``MISSING`` and ``FrozenInstanceError`` are dataclasses'
own (see the ``TYPE_CHECKING`` block at the end), so mypy checks every constructor call and
every ``replace`` exactly as it checks a dataclass. **At run time** the same behaviour is made
by the methods below, written once and shared by every record class:

- ``__init__`` taking fields positionally or by keyword, with defaults, ``default_factory``
  (a fresh value per instance) and dataclasses' ``TypeError`` for a missing, unknown or
  repeated argument; fields in declaration order, a base record's first;
- frozen: assigning or deleting an attribute raises ``FrozenInstanceError`` (an
  ``AttributeError``);
- with ``eq=True`` (the default) ``__eq__`` and ``__hash__`` over the fields with
  ``compare=True``; with ``repr=True`` (the default) ``Name(field=value, ...)``;
- ``__match_args__``, and class attributes for plain defaults, as dataclasses leave them.

What it refuses rather than getting wrong: anything but ``frozen=True``, ``order``,
``slots``, ``kw_only``, ``unsafe_hash``, ``init=False`` and a ``__post_init__`` raise
``TypeError`` when the class is defined. And these classes are *not* dataclasses at run time:
``dataclasses.replace`` / ``fields`` / ``asdict`` raise ``TypeError`` on them. Use this
module's ``replace`` and ``fields`` (the type checker cannot tell the two apart; the tests run
every ``replace`` the code makes).

May: define classes and build instances. May not: import anything but ``collections.abc``,
``types`` and ``typing`` (it sits at the bottom of the package, under ``errors``, and
``status`` imports it first).
"""

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

__all__ = [
    "MISSING",
    "FrozenInstanceError",
    "FrozenRecordError",
    "field",
    "fields",
    "is_record",
    "record",
    "replace",
]

_T = TypeVar("_T")


class _MissingType:
    """The "no default" marker (``MISSING``), as dataclasses has one."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _MissingType()
_NO_VALUE: Any = object()  # a slot of the __init__ template no argument filled
_set_attr = object.__setattr__


class FrozenRecordError(AttributeError):
    """An attribute of a frozen record was assigned or deleted (``FrozenInstanceError`` at run
    time: the type checker sees dataclasses' class of that name)."""


class _Field:
    """One field: its name, type, default or default factory, and dataclasses' flags."""

    __slots__ = ("compare", "default", "default_factory", "metadata", "name", "repr", "type")

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        repr: bool,
        compare: bool,
        metadata: Mapping[str, Any] | None,
    ) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.metadata: Mapping[str, Any] = MappingProxyType(dict(metadata or {}))

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, type={self.type!r}, default={self.default!r})"


def _field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | Any = _MISSING,
    repr: bool = True,
    compare: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> Any:
    return _Field(default, default_factory, repr, compare, metadata)


class _Spec:
    """What the shared methods need to know of one record class, worked out once."""

    __slots__ = (
        "compared", "factories", "fields", "known", "names", "required", "shown", "template"
    )  # fmt: skip

    def __init__(self, fields: tuple[_Field, ...]) -> None:
        self.fields = fields
        self.names = tuple(f.name for f in fields)
        self.known = frozenset(self.names)
        self.required = tuple(
            f.name for f in fields if f.default is _MISSING and f.default_factory is _MISSING
        )
        self.factories = tuple(
            (f.name, f.default_factory) for f in fields if f.default_factory is not _MISSING
        )
        self.compared = tuple(f.name for f in fields if f.compare)
        self.shown = tuple(f.name for f in fields if f.repr)
        # every field in order with its plain default (_NO_VALUE: none): what __init__ copies
        self.template = {f.name: _NO_VALUE if f.default is _MISSING else f.default for f in fields}


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    spec: _Spec = cls.__record_spec__
    names = spec.names
    values: dict[str, Any] = spec.template.copy()
    if args:
        if len(args) > len(names):
            low, high = len(spec.required) + 1, len(names) + 1
            takes = f"{high}" if low == high else f"from {low} to {high}"
            raise TypeError(
                f"{cls.__name__}.__init__() takes {takes} positional arguments "
                f"but {len(args) + 1} were given"
            )
        values.update(zip(names, args, strict=False))
        for name in kwargs.keys() & set(names[: len(args)]):
            raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument {name!r}")
    if kwargs:
        if not spec.known.issuperset(kwargs):
            unknown = next(k for k in kwargs if k not in spec.known)
            raise TypeError(
                f"{cls.__name__}.__init__() got an unexpected keyword argument {unknown!r}"
            )
        values.update(kwargs)
    for name, factory in spec.factories:
        if values[name] is _NO_VALUE:
            values[name] = factory()
    for name in spec.required:
        if values[name] is _NO_VALUE:
            missing = [repr(n) for n in spec.required if values[n] is _NO_VALUE]
            listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1])
            if len(missing) > 1:
                listed += f"{',' if len(missing) > 2 else ''} and {missing[-1]}"
            raise TypeError(
                f"{cls.__name__}.__init__() missing {len(missing)} required positional "
                f"argument{'s' if len(missing) > 1 else ''}: {listed}"
            )
    _set_attr(self, "__dict__", values)


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenRecordError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field {name!r}")


def _compared(self: Any) -> tuple[Any, ...]:
    values = self.__dict__
    return tuple([values[n] for n in type(self).__record_spec__.compared])


def _eq(self: Any, other: object) -> object:  # a bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _hash(self: Any) -> int:
    return hash(_compared(self))


def _repr(self: Any) -> str:
    values = self.__dict__
    shown = ", ".join(f"{n}={values[n]!r}" for n in type(self).__record_spec__.shown)
    return f"{type(self).__qualname__}({shown})"


def _is_class_var(hint: Any) -> bool:
    """``ClassVar[...]``, also as the text ``from __future__ import annotations`` leaves."""
    if isinstance(hint, str):
        return hint.strip().startswith(("ClassVar", "typing.ClassVar"))
    return hint is ClassVar or getattr(hint, "__origin__", None) is ClassVar


def _own_fields(cls: type) -> Iterator[_Field]:
    """The fields ``cls`` declares itself, in order; class attributes left as dataclasses
    leave them (a plain default stays, a ``field()`` is replaced by its default or removed)."""
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 (inspect is what we avoid)
    for name, hint in own.items():
        if _is_class_var(hint):
            continue
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, _Field):
            spec = value
            if spec.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        else:
            spec = _Field(value, _MISSING, True, True, None)
        if isinstance(spec.default, list | dict | set):
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not "
                             "allowed: use default_factory")  # fmt: skip
        spec.name, spec.type = name, hint
        yield spec


def _record(
    cls: type | None = None,
    /,
    *,
    frozen: bool = False,
    init: bool = True,
    eq: bool = True,
    repr: bool = True,
    **unsupported: Any,
) -> Any:
    def wrap(cls: type) -> type:
        bad = [k for k, v in unsupported.items() if v]  # order=True, slots=True, a typo...
        if not frozen or not init or bad or hasattr(cls, "__post_init__"):
            what = ", ".join(bad) or ("__post_init__" if init and frozen else "init=False")
            raise TypeError(
                f"{cls.__name__}: a record is a frozen=True dataclass without {what} "
                "(use dataclasses.dataclass for that)"
            )
        inherited: dict[str, _Field] = {}
        for base in reversed(cls.__mro__[1:]):
            base_spec = base.__dict__.get("__record_spec__")
            if base_spec is not None:
                inherited.update({f.name: f for f in base_spec.fields})
        for f in _own_fields(cls):
            inherited[f.name] = f  # a redefined field keeps its place, as in dataclasses
        fields = tuple(inherited.values())
        seen_default = False
        for f in fields:
            has_default = f.default is not _MISSING or f.default_factory is not _MISSING
            if seen_default and not has_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            seen_default = seen_default or has_default
        spec = _Spec(fields)
        cls.__record_spec__ = spec  # type: ignore[attr-defined]
        cls.__match_args__ = spec.names  # type: ignore[attr-defined, misc]
        cls.__init__ = _init  # type: ignore[misc]
        cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign, assignment]
        cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign, assignment]
        if eq:
            cls.__eq__ = _eq  # type: ignore[method-assign, assignment]
            cls.__hash__ = _hash  # type: ignore[method-assign, assignment]
        if repr:
            cls.__repr__ = _repr  # type: ignore[method-assign, assignment]
        return cls

    return wrap if cls is None else wrap(cls)


def _fields(class_or_instance: Any) -> tuple[_Field, ...]:
    try:
        found: tuple[_Field, ...] = class_or_instance.__record_spec__.fields
    except AttributeError:
        raise TypeError("must be called with a record class or instance") from None
    return found


def _replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of the record ``obj`` with ``changes``, through its ``__init__``."""
    values = {n: v for n, v in obj.__dict__.items() if n not in changes}
    return type(obj)(**values, **changes)


def is_record(obj: Any) -> bool:
    """Whether ``obj`` is a record class or instance (``dataclasses.is_dataclass`` says no)."""
    return hasattr(obj if isinstance(obj, type) else type(obj), "__record_spec__")


if TYPE_CHECKING:
    from dataclasses import MISSING as MISSING
    from dataclasses import FrozenInstanceError as FrozenInstanceError
    from dataclasses import dataclass as record
    from dataclasses import field as field
    from dataclasses import fields as fields
    from dataclasses import replace as replace
else:
    MISSING = _MISSING
    FrozenInstanceError = FrozenRecordError
    record = _record
    field = _field
    fields = _fields
    replace = _replace
