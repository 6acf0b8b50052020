"""The edit use cases joined to their edit classes, and the edits they make from arguments.

``intent.usecases`` names an edit by its ``Edit.kind`` (so it stays light); here every module
of ``intent.edits*`` is imported and each kind found in exactly one class. ``fields_of`` is
what a surface takes for a use case (its class's fields, less ``fixed``, within ``only``) and
``make`` builds the edit from them: the CLI's flags and the MCP tools' parameters come from
the same two functions.

May: import the edit classes, read their fields. May not: do I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any, get_args

from reconciler.intent import edits, edits_control, edits_race, edits_workload
from reconciler.intent.edits import Edit
from reconciler.intent.usecases import ALL, Arg, UseCase
from reconciler.model.vocabulary import APIS, MODES, WANTS
from reconciler.model.workload import Restart, WhenDone

#: The modules that declare edits (each imported above, so every class is known).
MODULES = (edits, edits_race, edits_workload, edits_control)


#: The model's vocabularies a declaration's ``Arg.vocabulary`` names (its choices).
VOCABULARIES: Mapping[str, tuple[str, ...]] = {
    "modes": MODES,
    "apis": APIS,
    "wants": WANTS,
    "restarts": get_args(Restart),
    "when_done": get_args(WhenDone),
}


def choices_of(arg: Arg) -> tuple[str, ...]:
    """The values ``arg`` may take (empty: any)."""
    return VOCABULARIES[arg.vocabulary] if arg.vocabulary else arg.choices


def _subclasses(cls: type[Any]) -> Iterator[type[Edit]]:
    sub: type[Edit]
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@cache
def edit_classes() -> Mapping[str, type[Edit]]:
    """``Edit.kind`` -> its class, for every edit of the ``intent.edits*`` modules."""
    ours = {m.__name__: m for m in MODULES}
    found: dict[str, type[Edit]] = {}
    for cls in _subclasses(Edit):
        module = ours.get(cls.__module__)
        # (a slots dataclass is a new class: the one it replaced lingers among the subclasses)
        if module is None or getattr(module, cls.__name__, None) is not cls:
            continue
        if cls.kind in found:
            raise TypeError(f"two edits of kind {cls.kind!r}: {found[cls.kind]} and {cls}")
        found[cls.kind] = cls
    return found


def edit_of(case: UseCase) -> type[Edit]:
    """The edit class ``case`` applies; TypeError when it declares none or an unknown one."""
    if case.edit is None:
        raise TypeError(f"use case {case.name!r} is not an edit")
    try:
        return edit_classes()[case.edit]
    except KeyError:
        raise TypeError(f"use case {case.name!r} names no edit {case.edit!r}") from None


def fields_of(case: UseCase) -> list[dataclasses.Field[Any]]:
    """The fields a surface takes for ``case``, in the class's order."""
    fixed = dict(case.fixed)
    fields = [f for f in dataclasses.fields(edit_of(case)) if f.init]
    unknown = (set(fixed) | set(case.only or ()) | {a.field for a in case.args}) - {
        f.name for f in fields
    }
    if unknown:
        raise TypeError(f"use case {case.name!r}: {edit_of(case).__name__} has no {unknown}")
    return [f for f in fields if f.name not in fixed and (case.only is None or f.name in case.only)]


def make(case: UseCase, args: Mapping[str, Any]) -> Edit:
    """The edit ``case`` makes from the arguments a surface took (a list given for a tuple
    field is made a tuple)."""
    values = {}
    for f in fields_of(case):
        if f.name in args:
            value = args[f.name]
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return edit_of(case)(**dict(case.fixed), **values)


def edit_cases() -> list[UseCase]:
    """Every use case that applies an edit (checked: each names a known edit)."""
    cases = [c for c in ALL if c.edit is not None]
    for case in cases:
        fields_of(case)
    return cases
