"""The loader's rules for ``setup.at_boot`` and ``workload.before_end`` (``model/load_resolve``).

- ``at_boot`` runs the setup scripts from the node's startup-script metadata, as root, on every
  boot: it needs scripts, it cannot go with ``bootstrap: false`` in the same block, and not with
  ``setup.telemetry`` (whose client is installed over SSH into the SSH user's home). Tailscale
  stays on the SSH path (its key never goes into metadata), after the boot's setup is done.
- ``before_end`` runs a lead before a known end: the lead must be shorter than the run
  (a flex-start slot's ``max_run_duration``) and than ``hold_for``; a ``before_end`` needs a
  workload (a command in its block or an outer one); a race group's ``across: group`` program
  does not take one (its winners' ends are not joined yet).

Each problem is reported where the key was written (the innermost block that set it), once.
Pure: values in, diagnostics out through ``err``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.model import flex
from reconciler.model.desired import DesiredFile, Setup, SlotSpec, WorkloadModel
from reconciler.model.durations import duration_text
from reconciler.model.load_salvage import Loc

Err = Callable[[Loc, str], object]


def needs_command(merged: Mapping[str, Any]) -> str:
    """The message for a workload block that ends up without a command."""
    if merged.get("before_end") is not None:
        return (
            "before_end runs before a workload's end, and this workload has no command "
            "(give one here or in an outer block)"
        )
    return "workload needs a command (here or in an outer block)"


def _entry(model: DesiredFile, where: Loc) -> tuple[Loc, Any] | None:
    """The written slot or generator a resolved slot came from, and its loc."""
    if where[:1] == ("slots",) and isinstance(where[1], int) and where[1] < len(model.slots):
        return where[:2], model.slots[where[1]]
    if where[:1] == ("generate",) and isinstance(where[1], int) and where[1] < len(model.generate):
        return where[:2], model.generate[where[1]]
    return None


def _setup_loc(model: DesiredFile, where: Loc) -> Loc:
    """Where the slot's ``at_boot`` was set: its own block, else ``defaults.setup``."""
    found = _entry(model, where)
    if found is not None:
        loc, entry = found
        setup: Setup | None = entry.setup
        if setup is not None and setup.at_boot is not None:
            return (*loc, "setup", "at_boot")
    return ("defaults", "setup", "at_boot")


def _before_end_loc(model: DesiredFile, where: Loc, group: str | None) -> Loc:
    """Where the slot's ``before_end`` was set: the innermost workload block that says it
    (the slot's, its race group's, its generator's, else ``defaults.workload``)."""
    layers: list[tuple[Loc, WorkloadModel | None]] = [
        (("defaults", "workload"), model.defaults.workload)
    ]
    found = _entry(model, where)
    if found is not None and found[0][0] == "generate":
        layers.append(((*found[0], "workload"), found[1].workload))
    for gi, rg in enumerate(model.race_groups):
        if rg.name == group:
            layers.append((("race_groups", gi, "workload"), rg.workload))
    if found is not None and found[0][0] == "slots":
        layers.append(((*found[0], "workload"), found[1].workload))
    for loc, w in reversed(layers):
        if w is not None and "before_end" in w.model_fields_set:
            return (*loc, "before_end")
    return ("defaults", "workload", "before_end")


def _setup_blocks(model: DesiredFile) -> list[tuple[Loc, Setup | None]]:
    blocks: list[tuple[Loc, Setup | None]] = [(("defaults", "setup"), model.defaults.setup)]
    blocks += [(("slots", i, "setup"), s.setup) for i, s in enumerate(model.slots)]
    blocks += [(("generate", i, "setup"), g.setup) for i, g in enumerate(model.generate)]
    return blocks


def check_ends(
    model: DesiredFile, slots: Sequence[SlotSpec], where: Mapping[str, Loc], err: Err
) -> None:
    """Report every misuse of ``at_boot`` and ``before_end`` (see the module docstring)."""
    for block, setup in _setup_blocks(model):
        if setup is not None and setup.at_boot and setup.bootstrap is False:
            err(
                (*block, "at_boot"),
                "at_boot runs the setup scripts at boot: it cannot go with bootstrap: false",
            )
    for gi, rg in enumerate(model.race_groups):
        if rg.workload is not None and rg.workload.across == "group" and rg.workload.before_end:
            err(
                ("race_groups", gi, "workload", "before_end"),
                "before_end is not supported on an across: group program (set it on the "
                "candidates' own workloads instead)",
            )
    defaults = model.defaults.workload
    if defaults is not None and defaults.before_end and not any(s.workload for s in slots):
        err(
            ("defaults", "workload", "before_end"),
            "before_end runs before a workload's end, but no slot runs a workload",
        )
    for spec in slots:
        loc = where.get(spec.name)
        if loc is None:
            continue
        if spec.setup.at_boot:
            _check_at_boot(spec, _setup_loc(model, loc), err)
        before = spec.workload.before_end if spec.workload is not None else None
        if before is not None:
            at = (*_before_end_loc(model, loc, spec.race_group), "lead")
            run = spec.max_run_seconds if spec.mode == flex.MODE else None
            if run and before.lead >= run:
                err(
                    at,
                    f"lead {duration_text(before.lead)} is not shorter than the run "
                    f"(max_run_duration {duration_text(run)}): it would run before the start",
                )
            hold_for = spec.hold.hold_for_seconds
            if hold_for and before.lead >= hold_for:
                err(
                    at,
                    f"lead {duration_text(before.lead)} is not shorter than hold_for "
                    f"{duration_text(hold_for)}: it would run before the node is held",
                )


def _check_at_boot(spec: SlotSpec, at: Loc, err: Err) -> None:
    if spec.setup.telemetry:
        err(
            at,
            "at_boot runs the scripts as root at boot, and setup.telemetry installs its "
            "client over SSH in the SSH user's home: turn one of them off",
        )
    if not spec.setup.scripts:
        err(at, "at_boot needs setup scripts (setup.scripts or settings.setup_scripts)")
