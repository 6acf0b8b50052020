"""A schema-valid desired file -> ``Desired``: generators expanded, defaults applied, and the
rules across the file checked (``model/load.py``'s second half).

``resolve`` reports every problem at once, at the line the user has to change: duplicate
names after generation, race membership, ``want`` only outside race groups, holds, generator
sizes, a known runtime version, zones and regions that exist, and what each slot is and which
API holds it (``model/load_shape.py``). With a ``_Salvage`` (``model/load_salvage.py``: the schema
refused part of the file) the checks that would only guess about the part left out are
skipped, and a problem that follows from another is not reported beside it.

Pure: values in, values out; no file is read.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from reconciler.errors import Diagnostic, InvalidDesiredState, UnsafeName
from reconciler.model import flex, names, tpu_zones
from reconciler.model.accelerators import TPU_API, canonical
from reconciler.model.desired import (
    DEFAULT_RUNTIME_VERSIONS,
    Desired,
    DesiredFile,
    GeneratorModel,
    HoldSpec,
    MemberSpec,
    RaceGroupSpec,
    Setup,
    SetupSpec,
    SlotModel,
    SlotSpec,
    WorkloadModel,
    WorkloadSpec,
)
from reconciler.model.holds import HoldKeys, resolve_hold
from reconciler.model.holds import problems as hold_problems
from reconciler.model.load_across import across_group, check_across
from reconciler.model.load_compute import check_compute
from reconciler.model.load_ends import check_ends, needs_command
from reconciler.model.load_quotas import check_fits, resolve_quotas
from reconciler.model.load_salvage import Loc, _Salvage
from reconciler.model.load_shape import Resolved, Written, family_api_problems, resolve_shape
from reconciler.model.ssh_proxy import resolve_proxy

#: Most slots a file may ask for (explicit and generated). plan() is measured at 10,000.
MAX_SLOTS: Final = 10_000


class _Positions(Protocol):
    """Where a ``loc`` is in the file: its 1-based line and column (``model/load.py``)."""

    def at(self, loc: Sequence[int | str], *, key: bool = False) -> tuple[int, int]: ...


def _dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    seen: set[Diagnostic] = set()
    out = []
    for d in diags:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return sorted(out, key=lambda d: (d.line, d.col))


def _setup(defaults: Setup, own: Setup | None, scripts: Sequence[str]) -> SetupSpec:
    """Built-in defaults, overlaid by ``defaults.setup``, overlaid by the slot's own flags."""
    flags = {"bootstrap": False, "tailscale": False, "tmux": True, "at_boot": False}
    for layer in (defaults, own):
        for name in flags:
            value = getattr(layer, name, None) if layer is not None else None
            if value is not None:
                flags[name] = value
    chosen: Sequence[str] = scripts
    for layer in (defaults, own):
        if layer is not None and layer.scripts is not None:
            chosen = layer.scripts
    telemetry = False
    for layer in (defaults, own):
        if layer is not None and layer.telemetry is not None:
            telemetry = layer.telemetry
    flags["bootstrap"] = flags["bootstrap"] or flags["at_boot"]  # at_boot runs the scripts
    return SetupSpec(
        **flags,
        generation=defaults.generation + (own.generation if own is not None else 0),
        scripts=tuple(chosen),
        telemetry=telemetry,
    )


#: A workload layer and where it was written (None: the layer has no workload block).
Layer = tuple[WorkloadModel | None, Loc]


def _workload(layers: Sequence[Layer], err: Callable[[Loc, str], object]) -> WorkloadSpec | None:
    """Overlay workload blocks field by field (outermost first). A slot runs a workload when
    some layer names a command; generations add up, as setup's do."""
    merged: dict[str, Any] = {}
    generation = 0
    present = [(w, loc) for w, loc in layers if w is not None]
    for w, _ in present:
        merged.update({name: getattr(w, name) for name in w.model_fields_set})
        generation += w.generation
    if not present:
        return None
    loc = present[-1][1]
    if merged.get("command") is None:
        # defaults.workload alone may set policy without a command; any closer block must
        # end up with one.
        if present[-1][1][:1] != ("defaults",):
            err((*loc, "workload"), needs_command(merged))
        return None
    loc = (*loc, "workload")
    w = WorkloadModel.model_validate(merged)
    env = dict(w.env or {})
    secrets = dict(w.secret_env or {})
    for name in sorted(set(env) & set(secrets)):
        err((*loc, "secret_env", name), f"{name!r} is set in both env and secret_env")
    if w.restart == "always" and w.when_done == "release":
        err(loc, "when_done: release never happens with restart: always (it relaunches)")
    command = w.command
    assert command is not None
    return WorkloadSpec(
        command=command if isinstance(command, str) else tuple(command),
        workdir=w.workdir,
        env=tuple(sorted(env.items())),
        secret_env=tuple(sorted(secrets.items())),
        restart=w.restart,
        max_failures=w.max_failures,
        stall_after=w.stall_after,
        stop_grace=w.stop_grace,
        when_done=w.when_done,
        generation=generation,
        idle_after=w.idle_after,
        idle_below=w.idle_below,
        take_tpu=w.take_tpu,
        keep_attempts=w.keep_attempts,
        before_end=w.before_end.resolved() if w.before_end is not None else None,
    )


@dataclass
class _Resolution:
    """What ``resolve``'s steps share: the diagnostics so far and the slots made so far."""

    model: DesiredFile
    pos: _Positions
    source: str
    runtimes: dict[str, str]
    diags: list[Diagnostic] = field(default_factory=list)
    membership: dict[str, str] = field(default_factory=dict)  # slot -> its race group
    slots: list[SlotSpec] = field(default_factory=list)
    where: dict[str, Loc] = field(default_factory=dict)  # slot -> where it was defined
    groups: dict[str, HoldKeys] = field(default_factory=dict)  # race group -> its model
    group_layer: dict[str, Layer] = field(default_factory=dict)  # race group -> its workload
    salvage: _Salvage | None = None  # the file's schema errors left these parts out
    #: slot -> "needs a want" (it is in no race group); a race group's unknown member that
    #: looks like this slot is the cause, and says so instead
    unwanted: dict[str, Diagnostic] = field(default_factory=dict)
    flex_checked: set[Loc] = field(default_factory=set)  # entries whose flex keys were checked
    notes: list[Diagnostic] = field(default_factory=list)  # said about a valid file

    def workload(self, outer: Layer, slot: str, own: Layer) -> WorkloadSpec | None:
        """defaults < generator (``outer``) < race group < the slot's own block (``own``)."""
        group = self.group_layer.get(self.membership.get(slot, ""), (None, ()))
        if across_group(group[0]):
            return None  # the group runs one program across its winners (``group_workload``)
        defaults: Layer = (self.model.defaults.workload, ("defaults",))
        return _workload([defaults, outer, group, own], self.err)

    def at(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        if self.salvage is not None:
            loc = self.salvage.original(loc)
        return self.pos.at(loc, key=key)

    def err(self, loc: Loc, message: str, *, key: bool = False) -> Diagnostic | None:
        if self.salvage is not None:
            loc = self.salvage.original(loc)
            if self.salvage.suspect(loc):
                return None
        line, col = self.pos.at(loc, key=key)
        diag = Diagnostic(self.source, line, col, message)
        self.diags.append(diag)
        return diag

    def needs_want(self, slot: str, loc: Loc, message: str) -> None:
        """A slot in no race group without a ``want`` (unless a race group the schema refused
        may have listed it)."""
        s = self.salvage
        if s is not None and (s.members_uncertain or slot in s.members_left_out):
            return
        diag = self.err(loc, message)
        if diag is not None:
            self.unwanted[slot] = diag

    def add(self, spec: SlotSpec, loc: Loc) -> None:
        if spec.name in self.where:
            first = self.at(self.where[spec.name])
            self.err(loc, f"duplicate slot name {spec.name!r} (first defined at line {first[0]})")
            return
        self.where[spec.name] = loc
        self.slots.append(spec)

    def shape(self, w: Written, loc: Loc, where: Loc, *, prefix: str = "") -> Resolved | None:
        """The TPU one entry asks for (``model/load_shape``); its problems at ``loc``'s keys
        (a problem of the entry itself at ``where``, where its accelerator is written)."""
        settings = self.model.settings
        resolved, problems = resolve_shape(w, settings.apis, settings.images)
        for key, message, at_key in problems:
            self.err((*loc, key) if key is not None else where, prefix + message, key=at_key)
        if resolved is not None and resolved.alias is not None:
            line, col = self.at(where, key=where[-2:-1] == ("accelerators",))
            name = resolved.shape.accelerator
            self.notes.append(
                Diagnostic(
                    self.source,
                    line,
                    col,
                    f"note: {resolved.alias} is {name}: the name the APIs know, "
                    f"which is sent and shown",
                )
            )
        return resolved

    def spec_shape(
        self, resolved: Resolved | None, written: str | None, explicit: str | None, loc: Loc
    ) -> dict[str, Any]:
        """A ``SlotSpec``'s fields of what it is (a stand-in when ``resolved`` is None: the
        file is invalid then, and the spec is only used to check the rest)."""
        if resolved is None:
            return {"accelerator": canonical(written or ""), "runtime_version": ""}
        shape = resolved.shape
        tpu = shape.api == TPU_API
        return {
            "accelerator": shape.accelerator,
            "runtime_version": self.runtime_for(shape.accelerator, explicit, loc) if tpu else "",
            "api": shape.api,
            "machine_type": shape.machine_type,
            "topology": shape.topology,
            "hosts": shape.hosts,
            "chips": shape.chips,
            "image": resolved.image,
        }

    def runtime_for(self, accelerator: str, explicit: str | None, loc: Loc) -> str:
        if explicit:
            return explicit
        family = names.accelerator_family(accelerator)
        if family in self.runtimes:
            return self.runtimes[family]
        if self.salvage is not None and self.salvage.runtimes_uncertain:
            return ""
        self.err(
            loc,
            f"no runtime version for {accelerator!r}: set runtime_version here or "
            f"settings.runtime_versions.{family}",
        )
        return ""

    def raise_if_invalid(self) -> None:
        if self.diags:
            raise InvalidDesiredState(_dedupe(self.diags))


def resolve(
    model: DesiredFile,
    pos: _Positions,
    source: str,
    digest: str,
    *,
    prior: Sequence[Diagnostic] = (),
    salvage: _Salvage | None = None,
) -> Desired:
    """Expand generators, apply defaults and check the cross-field rules. Every problem is
    reported at once, with ``prior`` (the schema's): ``salvage`` is then what the schema
    let through, and the checks that would only guess about the rest are skipped."""
    settings = model.settings
    runtimes = {**DEFAULT_RUNTIME_VERSIONS, **settings.runtime_versions}
    r = _Resolution(model, pos, source, runtimes, diags=list(prior), salvage=salvage)
    for (key, family), message in family_api_problems(
        settings.apis, settings.images, settings.runtime_versions
    ):
        r.err(("settings", key, family), message, key=True)
    if not settings.allow_unknown_zones:
        _check_zones(r)
    _race_membership(r)
    _check_holds(r)
    _written_slots(r)
    if _check_generator_sizes(r):
        _generated_slots(r)
        _check_race_groups(r, names_known=salvage is None or not salvage.names_uncertain)
    else:
        _check_race_groups(r, names_known=False)
    check_across(model, r.slots, r.where, r.err)
    check_compute(r.slots, r.where, settings.reservations, r.err)
    check_ends(model, r.slots, r.where, r.err)
    quotas = resolve_quotas(model.quotas, settings.apis, r.err)
    check_fits(r.slots, r.where, quotas, {n: m.chips for n, m in model.members.items()}, r.err)
    group_workloads = [_group_workload(r, gi) for gi in range(len(model.race_groups))]
    r.raise_if_invalid()
    slots = r.slots
    groups = tuple(
        RaceGroupSpec(
            name=g.name, count=g.count, slots=tuple(g.slots), paused=g.paused, owner=g.owner
        )
        if w is None
        else RaceGroupSpec(
            name=g.name,
            count=g.count,
            slots=tuple(g.slots),
            paused=g.paused,
            owner=g.owner,
            workload=w,
            min_count=g.min_count,
        )
        for g, w in zip(model.race_groups, group_workloads, strict=True)
    )
    return Desired(
        project=model.project,
        settings=settings,
        slots=tuple(slots),
        race_groups=groups,
        source=source,
        digest=digest,
        quotas=quotas,
        members=tuple(
            MemberSpec(name, dict(m.chips), m.priority) for name, m in model.members.items()
        ),
        notes=tuple(sorted(set(r.notes), key=lambda d: (d.line, d.col))),
    )


def _check_zones(r: _Resolution) -> None:
    """Every zone and region written is one that exists (``model/tpu_zones.KNOWN_ZONES``), or
    is refused with a "did you mean" (``settings.allow_unknown_zones`` lets new ones in)."""
    model = r.model
    zones: list[tuple[Loc, str, bool]] = [
        (("slots", i, "zone"), s.zone, False) for i, s in enumerate(model.slots)
    ]
    zones += [
        (("generate", gi, "zones", zi), z, False)
        for gi, g in enumerate(model.generate)
        for zi, z in enumerate(g.zones)
    ]
    zones += [(("quotas", i, "zone"), q.zone, False) for i, q in enumerate(model.quotas) if q.zone]
    for key in ("subnets", "zone_codes", "reservations"):
        zones += [(("settings", key, z), z, True) for z in getattr(model.settings, key)]
    for loc, zone, at_key in zones:
        problem = tpu_zones.zone_problem(zone)
        if problem is not None:
            r.err(loc, problem, key=at_key)
    for i, q in enumerate(model.quotas):
        problem = tpu_zones.region_problem(q.region) if q.region else None
        if problem is not None:
            r.err(("quotas", i, "region"), problem)


def _group_workload(r: _Resolution, gi: int) -> WorkloadSpec | None:
    """A race group's own program when it runs across its winners (defaults < the group)."""
    rg = r.model.race_groups[gi]
    if not across_group(rg.workload):
        return None
    defaults: Layer = (r.model.defaults.workload, ("defaults",))
    return _workload([defaults, (rg.workload, ("race_groups", gi))], r.err)


def _race_membership(r: _Resolution) -> None:
    """Which group each slot races in (``r.membership``); duplicates are diagnosed."""
    model, err, membership = r.model, r.err, r.membership
    group_names: set[str] = set()
    for gi, rg in enumerate(model.race_groups):
        r.group_layer[rg.name] = (rg.workload, ("race_groups", gi))
        if rg.name in group_names:
            err(("race_groups", gi, "name"), f"duplicate race group name {rg.name!r}")
        group_names.add(rg.name)
        seen_here: set[str] = set()
        for si, name in enumerate(rg.slots):
            if name in seen_here:
                err(("race_groups", gi, "slots", si), f"{name!r} is listed twice in this group")
            elif name in membership:
                err(
                    ("race_groups", gi, "slots", si),
                    f"slot {name!r} is already in race group {membership[name]!r}; "
                    "a slot can race in one group only",
                )
            else:
                membership[name] = rg.name
            seen_here.add(name)


def _check_holds(r: _Resolution) -> None:
    """The time and pause keys of every slot, generator and race group (``model/holds``)."""
    blocks: list[tuple[Loc, HoldKeys]] = [(("slots", i), m) for i, m in enumerate(r.model.slots)]
    blocks += [(("generate", i), m) for i, m in enumerate(r.model.generate)]
    blocks += [(("race_groups", i), m) for i, m in enumerate(r.model.race_groups)]
    r.groups.update((g.name, g) for g in r.model.race_groups)
    for where, keys in blocks:
        for key, message in hold_problems(keys):
            r.err((*where, key), message, key=True)


def _hold(r: _Resolution, keys: HoldKeys, group: str | None) -> HoldSpec:
    """A slot's holds: its own keys, else its race group's."""
    return resolve_hold(keys, r.groups.get(group) if group else None)


def _group_owner(r: _Resolution, group: str | None) -> str | None:
    """The ``owner:`` of race group ``group`` (None: no group, or it names no owner)."""
    for model in r.model.race_groups if group else ():
        if model.name == group:
            return model.owner
    return None


def _written_slots(r: _Resolution) -> None:
    """The slots written out under ``slots:``, with defaults applied."""
    model, err, add = r.model, r.err, r.add
    settings, defaults, membership, slots = model.settings, model.defaults, r.membership, r.slots
    for i, slot in enumerate(model.slots):
        loc: Loc = ("slots", i)
        written = Written(
            slot.accelerator,
            slot.machine_type,
            slot.topology,
            slot.api,
            slot.runtime_version,
            slot.image,
        )
        where = (*loc, "accelerator") if slot.accelerator is not None else (*loc, "name")
        resolved = r.shape(written, loc, where)
        group = membership.get(slot.name)
        if group is not None and slot.want is not None:
            err(
                (*loc, "want"),
                f"slot {slot.name!r} races in group {group!r}, which decides whether it is held; "
                "remove 'want' here",
                key=True,
            )
        if group is None and slot.want is None:
            r.needs_want(
                slot.name,
                (*loc, "name"),
                f"slot {slot.name!r} needs 'want: held' or 'want: released' "
                "(or membership in a race group)",
            )
        add(
            SlotSpec(
                name=slot.name,
                zone=slot.zone,
                **r.spec_shape(resolved, slot.accelerator, slot.runtime_version, (*loc, "name")),
                mode=slot.mode or defaults.mode,
                want=slot.want if group is None else None,
                race_group=group,
                valid_until_seconds=int(slot.valid_until) if slot.valid_until else None,
                setup=_setup(defaults.setup, slot.setup, settings.setup_scripts),
                order=len(slots),
                hold=_hold(r, slot, group),
                **_flex(r, slot, slot.mode or defaults.mode, loc),
                workload=r.workload((None, ()), slot.name, (slot.workload, loc)),
                owner=slot.owner or _group_owner(r, group),
                slices=slot.slices,
                ssh_proxy=resolve_proxy(slot.ssh_proxy, settings.ssh_proxy),
            ),
            (*loc, "name"),
        )


def _flex(r: _Resolution, entry: SlotModel | GeneratorModel, mode: str, loc: Loc) -> Any:
    """A slot's flex-start fields (``model/flex``); each broken rule is reported at its key
    (once per generator, not once per slot it makes)."""
    if loc not in r.flex_checked:
        r.flex_checked.add(loc)
        for key, message in flex.problems(mode, entry.max_run_duration, entry.renew):
            if key in entry.model_fields_set:
                r.err((*loc, key), message, key=True)
            else:
                r.err(loc, message)
    run = entry.max_run_duration
    return {"max_run_seconds": int(run) if run else None, "renew": bool(entry.renew)}


def _check_generator_sizes(r: _Resolution) -> bool:
    """Refuse generators that repeat a zone or bring the file past ``MAX_SLOTS`` (checked
    before anything is expanded, so a huge count costs nothing)."""
    model, err = r.model, r.err
    asked = len(model.slots)
    for gi, gen in enumerate(model.generate):
        loc = ("generate", gi)
        for zi, zone in enumerate(gen.zones):
            if zone in gen.zones[:zi]:
                err((*loc, "zones", zi), f"zone {zone!r} is listed twice")
        asked += len(set(gen.zones)) * sum(gen.accelerators.values())
        if asked > MAX_SLOTS:
            err(loc, f"this generator brings the file past {MAX_SLOTS:,} slots; ask for fewer")
            return False
    return True


def _generated_slots(r: _Resolution) -> None:
    """The slots the ``generate:`` entries expand to, named by ``names.slot_name``."""
    model, err, add = r.model, r.err, r.add
    settings, defaults, membership, slots = model.settings, model.defaults, r.membership, r.slots
    for gi, gen in enumerate(model.generate):
        loc = ("generate", gi)
        mode = gen.mode or defaults.mode
        shapes = {
            written: r.shape(
                Written(written, None, None, gen.api, gen.runtime_version, gen.image),
                loc,
                (*loc, "accelerators", written),
                prefix=f"{written}: ",
            )
            for written in gen.accelerators
        }
        for zone in dict.fromkeys(gen.zones):
            code = settings.zone_codes.get(zone) or names.zone_code(zone)
            for written, count in gen.accelerators.items():
                accelerator = canonical(written)
                for index in range(1, count + 1):
                    try:
                        name = names.slot_name(mode, accelerator, code, index)
                    except UnsafeName as e:
                        err(loc, f"generated name is invalid: {e}")
                        continue
                    group = membership.get(name)
                    if group is None and gen.want is None:
                        r.needs_want(
                            name,
                            loc,
                            f"generated slot {name!r} needs a 'want' on this generator "
                            "(or membership in a race group)",
                        )
                    add(
                        SlotSpec(
                            name=name,
                            zone=zone,
                            **r.spec_shape(shapes[written], written, gen.runtime_version, loc),
                            mode=mode,
                            want=gen.want if group is None else None,
                            race_group=group,
                            valid_until_seconds=int(gen.valid_until) if gen.valid_until else None,
                            setup=_setup(defaults.setup, gen.setup, settings.setup_scripts),
                            order=len(slots),
                            generated=True,
                            hold=_hold(r, gen, group),
                            **_flex(r, gen, mode, loc),
                            workload=r.workload((gen.workload, loc), name, (None, ())),
                            owner=_group_owner(r, group) or gen.owner,
                            slices=gen.slices,
                            ssh_proxy=resolve_proxy(gen.ssh_proxy, settings.ssh_proxy),
                        ),
                        loc,
                    )


def _check_race_groups(r: _Resolution, *, names_known: bool) -> None:
    """Every candidate of a race group is a known slot, and ``count`` fits the candidates.

    An unknown candidate that looks like a slot in no race group and without a ``want`` is
    the cause of that slot's "needs a want": one problem, reported here, where the fix is
    (adding the ``want`` would hold a TPU the race was meant to decide)."""
    model, err, where = r.model, r.err, r.where
    left_out = r.salvage.slots_left_out if r.salvage is not None else set()
    for gi, rg in enumerate(model.race_groups):
        for si, name in enumerate(rg.slots):
            if name in where or not names_known or name in left_out:
                continue
            loc = ("race_groups", gi, "slots", si)
            free = [n for n in r.unwanted if n in where]
            meant = difflib.get_close_matches(name, free, n=1) or difflib.get_close_matches(
                name, list(where), n=1
            )
            if meant and meant[0] in r.unwanted:
                r.diags.remove(r.unwanted.pop(meant[0]))
                err(
                    loc,
                    f"unknown slot {name!r} (did you mean {meant[0]!r}? that slot is in no "
                    "race group and has no 'want')",
                )
            else:
                hint = f" (did you mean {meant[0]!r}?)" if meant else ""
                err(loc, f"unknown slot {name!r}{hint}")
        if rg.count > len(rg.slots):
            err(
                ("race_groups", gi, "count"),
                f"count {rg.count} is more than the {len(rg.slots)} candidates",
            )
