"""The loader's rules for ``workload.across: group`` and ``min_count`` (``model/load_resolve``).

A race group whose workload says ``across: group`` runs ONE program over every winner's
workers (``core/across.py``): its winners become the slices of one multislice program, so

- ``across`` is a race group's key only (a slot, generator or ``defaults`` block saying it is
  reported where it is written);
- every candidate is in one zone (the slices talk over the data-centre network), of one
  accelerator and number of hosts (every slice has the same workers; a v6e-8 has one host
  on the TPU API, two as ``machine_type: ct6e-standard-4t``) and a single slice
  (``slices: 1``);
- a candidate has no workload block of its own (the group's program is the only one);
- ``min_count`` needs ``across: group`` and is at most ``count``;
- the group's name is no slot's (the program's state and files are kept under it).

Pure: values in, diagnostics out through ``err``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from reconciler.model.desired import DesiredFile, RaceGroupModel, SlotSpec, WorkloadModel
from reconciler.model.load_salvage import Loc

Err = Callable[[Loc, str], object]


def across_group(workload: WorkloadModel | None) -> bool:
    """True when this workload block asks for one program across the group's winners."""
    return workload is not None and workload.across == "group"


def check_across(
    model: DesiredFile, slots: Sequence[SlotSpec], where: Mapping[str, Loc], err: Err
) -> None:
    """Report every misuse of ``across`` and ``min_count`` (see the module docstring)."""
    outside: list[tuple[Loc, WorkloadModel | None]] = [
        (("defaults", "workload"), model.defaults.workload)
    ]
    outside += [(("slots", i, "workload"), s.workload) for i, s in enumerate(model.slots)]
    outside += [(("generate", i, "workload"), g.workload) for i, g in enumerate(model.generate)]
    for loc, w in outside:
        if w is not None and w.across is not None:
            err(
                (*loc, "across"),
                "across is a race group's workload key (one program across its winners)",
            )
    by_name = {s.name: s for s in slots}
    written = {s.name: i for i, s in enumerate(model.slots)}
    for gi, rg in enumerate(model.race_groups):
        _check_group(model, gi, rg, by_name, written, err)


def _check_group(
    model: DesiredFile,
    gi: int,
    rg: RaceGroupModel,
    by_name: Mapping[str, SlotSpec],
    written: Mapping[str, int],
    err: Err,
) -> None:
    loc: Loc = ("race_groups", gi)
    if not across_group(rg.workload):
        if rg.min_count is not None:
            err((*loc, "min_count"), "min_count needs workload.across: group on this race group")
        return
    if rg.min_count is not None and rg.min_count > rg.count:
        err((*loc, "min_count"), f"min_count {rg.min_count} is more than count {rg.count}")
    here = (*loc, "workload", "across")
    if rg.name in by_name:
        err(
            (*loc, "name"),
            f"race group {rg.name!r} runs one program under its own name: a slot has that name",
        )
    members = [by_name[n] for n in rg.slots if n in by_name]
    for key, what, word in (
        ("zone", "zone", "in"),
        ("accelerator", "accelerator", "in"),
        ("hosts", "number of hosts per slice", "with"),  # the same accelerator on two APIs
    ):
        seen: dict[object, str] = {}
        for s in members:
            seen.setdefault(getattr(s, key), s.name)
        if len(seen) > 1:
            shown = ", ".join(f"{name} {word} {value}" for value, name in seen.items())
            err(here, f"across: group needs every candidate of one {what} ({shown})")
    for s in members:
        if s.slices > 1:
            err(here, f"across: group needs single-slice candidates ({s.name} has slices: "
                f"{s.slices})")  # fmt: skip
        i = written.get(s.name)
        if i is not None and model.slots[i].workload is not None:
            err(
                ("slots", i, "workload"),
                f"slot {s.name!r} races in group {rg.name!r}, whose workload runs across its "
                "winners: remove this workload block",
            )
