"""What a slot is and which API holds it: the loader's rules (``model/load_resolve.py``) over
``accelerator``, ``machine_type``, ``topology``, ``api``, ``runtime_version`` and ``image``.

A slot names its TPU the way users name it, ``accelerator: tpu7x-128``, or as Compute Engine
does, ``machine_type: tpu7x-standard-4t`` with ``topology: 4x4x4`` (both may be written when
they agree). Its API is ``api:``, else ``tpu`` when only a machine type says (a machine type
is Compute Engine's), else ``settings.apis`` for its family, else the family's default
(``model/accelerators``: compute for TPU7x, tpu for the rest). Then:

- the family must be offered by that API (v2-v5e not on Compute Engine, TPU7x not on the
  TPU API), reported at the ``api:`` that chose it (or at ``settings.apis.FAMILY``);
- on the TPU API the accelerator type alone is sent: a topology other than its default,
  a machine type or an image is refused at its key; the software is ``runtime_version``;
- on Compute Engine the topology must be one the family offers and have the slot's chips,
  the machine type must hold it (a single-VM type only a slice of its own size); the software
  is ``image`` (``settings.images``, else the family's), and ``runtime_version`` is
  refused at its key.

The result is a ``Shape`` (chips, topology, hosts per slice, machine type, API) that the slot
carries, so nothing later derives it again.

Pure: values in, values out; problems are returned, the caller places them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from reconciler.model import accelerators as cat
from reconciler.model.accelerators import COMPUTE_API, TPU_API, MachineType, Shape, TpuFamily

#: (key of the entry the problem is at, or None for the entry itself; message; at the key)
Problem = tuple[str | None, str, bool]

_ON_COMPUTE: Final = (
    ", ".join(cat.OFFERED[COMPUTE_API][:-1]) + f" and {cat.OFFERED[COMPUTE_API][-1]}"
)
_ON_TPU: Final = f"{cat.OFFERED[TPU_API][0]} to {cat.OFFERED[TPU_API][-1]}"


@dataclass(frozen=True, slots=True)
class Written:
    """What one slot (or one accelerator of a generator) says about its TPU."""

    accelerator: str | None = None
    machine_type: str | None = None
    topology: str | None = None
    api: str | None = None
    runtime_version: str | None = None
    image: str | None = None


@dataclass(frozen=True, slots=True)
class Resolved:
    shape: Shape
    image: str | None  # Compute Engine's boot image (None on the TPU API)
    alias: str | None  # the accelerator as written when it was another spelling of the name


def not_offered(gen: TpuFamily, api: str, fix: str = "write api: {api}, or leave api out") -> str:
    """Why ``api`` cannot hold ``gen``, and ``fix`` (``{api}``: the one that can)."""
    other = gen.apis[0]  # a family not offered by one API is offered by the other
    if api == TPU_API:
        why = (
            f"the TPU API does not offer {gen.title}: it is frozen at {_ON_TPU}; "
            f"{gen.family} is held through Compute Engine"
        )
    else:
        why = (
            f"Compute Engine does not offer {gen.title} (it offers {_ON_COMPUTE}); "
            f"{gen.family} is held through the TPU API"
        )
    return f"{why}: {fix.format(api=other)}"


def family_api_problems(
    apis: Mapping[str, str], images: Mapping[str, str], runtimes: Mapping[str, str]
) -> list[tuple[tuple[str, str], str]]:
    """Problems of ``settings.apis`` / ``images`` / ``runtime_versions``, as ((key, family),
    message): a family mapped to an API that does not offer it, an image for a family
    Compute Engine does not hold, a runtime version for one the TPU API does not."""
    out: list[tuple[tuple[str, str], str]] = []
    for family, api in apis.items():
        gen = cat.family_entry(family)
        if gen is not None and api not in gen.apis:
            out.append((("apis", family), not_offered(gen, api, "map it to {api}, or remove it")))
    software = (
        ("images", images, COMPUTE_API, "Compute Engine", "a runtime version", "runtime_versions"),
        ("runtime_versions", runtimes, TPU_API, "the TPU API", "a boot image", "images"),
    )
    for key, families, api, words, instead, other in software:
        for family in families:
            gen = cat.family_entry(family)
            if gen is not None and api not in gen.apis:
                out.append(
                    (
                        (key, family),
                        f"{words} does not offer {gen.title}: its software is {instead} "
                        f"(settings.{other}.{family})",
                    )
                )
    return out


def resolve_shape(
    w: Written, apis: Mapping[str, str], images: Mapping[str, str]
) -> tuple[Resolved | None, list[Problem]]:
    """The slot's shape, API and image, or the problems (at the entry's keys). A value the
    schema already refused (an accelerator or machine type that does not exist) gives None
    and no problem of its own."""
    gen: TpuFamily | None = None
    chips = 0
    if w.accelerator is not None:
        found = cat.lookup(w.accelerator)
        if found is None:
            return None, []
        gen, chips = found
    machine = cat.MACHINE_TYPES.get(w.machine_type) if w.machine_type is not None else None
    if w.machine_type is not None and machine is None:
        return None, []
    if machine is not None:
        held = cat.family_entry(machine.family)
        assert held is not None
        if gen is not None and held is not gen:
            return None, [
                (
                    "machine_type",
                    f"machine type {machine.name} holds {held.title}, not {w.accelerator}: "
                    f"write one of them (or a {gen.family} machine type)",
                    False,
                )
            ]
        gen = held
    if gen is None:
        if w.topology is not None:
            return None, [("topology", "a topology needs accelerator or machine_type", True)]
        return None, [
            (
                None,
                "this slot needs accelerator (like v6e-8), or machine_type (and topology)",
                False,
            )
        ]
    api = w.api or (COMPUTE_API if machine is not None else None)
    api = api or apis.get(gen.family) or gen.apis[0]
    if api not in gen.apis:
        if w.api is None:
            return None, []  # settings.apis chose it: reported there, once
        return None, [("api", not_offered(gen, api), False)]
    if api == TPU_API:
        return _tpu_api(w, gen, chips)
    return _compute(w, gen, chips, machine, images)


def _alias(w: Written) -> str | None:
    written = w.accelerator
    return written if written is not None and cat.canonical(written) != written else None


def _tpu_api(w: Written, gen: TpuFamily, chips: int) -> tuple[Resolved | None, list[Problem]]:
    problems: list[Problem] = []
    shape = cat.tpu_api_shape(gen, chips)
    if w.machine_type is not None:
        problems.append(
            (
                "api",
                f"machine type {w.machine_type} is Compute Engine's: write api: compute, or "
                "accelerator alone for the TPU API",
                False,
            )
        )
    elif w.topology is not None and w.topology != shape.topology:
        problems.append(
            (
                "topology",
                f"api: tpu sends the accelerator type alone, whose topology is "
                f"{shape.topology}; another topology needs api: compute",
                False,
            )
        )
    if w.image is not None:
        problems.append(
            (
                "image",
                "image is the boot disk of api: compute; on the TPU API the software is "
                "runtime_version",
                True,
            )
        )
    return (None if problems else Resolved(shape, None, _alias(w))), problems


def _compute(
    w: Written,
    gen: TpuFamily,
    chips: int,
    machine: MachineType | None,
    images: Mapping[str, str],
) -> tuple[Resolved | None, list[Problem]]:
    problems: list[Problem] = []
    if w.runtime_version is not None:
        problems.append(
            (
                "runtime_version",
                "runtime_version is the TPU API's software; on api: compute the software is "
                "the boot image (image:, default "
                f"{images.get(gen.family) or gen.image}): remove runtime_version",
                True,
            )
        )
    topology = w.topology
    if topology is not None:
        problem = _topology_problem(gen, topology, chips, w.accelerator)
        if problem is not None:
            return None, [*problems, ("topology", problem, False)]
        chips = cat.topology_chips(topology)
    elif not chips and machine is not None:  # a machine type alone: one VM is the slice
        chips = machine.chips_per_vm
    topology = topology or gen.topology_of(chips)
    if topology is None:
        return None, [
            *problems,
            ("machine_type", f"{gen.title} has no slice of {chips} chips", False),
        ]
    if machine is None:
        machine = gen.default_machine_type(chips)
        if machine is None:
            return None, [
                *problems,
                (None, f"Compute Engine has no machine type for {gen.accelerator(chips)}", False),
            ]
    else:
        problem = _machine_problem(gen, machine, chips, topology)
        if problem is not None:
            return None, [*problems, ("machine_type", problem, False)]
    image = w.image or images.get(gen.family) or gen.image
    if problems:
        return None, problems
    return Resolved(cat.compute_shape(gen, machine, topology), image, _alias(w)), []


def _topology_problem(
    gen: TpuFamily, topology: str, chips: int, accelerator: str | None
) -> str | None:
    if not gen.valid_topology(topology):
        if gen.dims == 3:
            rule = (
                f"{', '.join(gen.small)}, or AxBxC with A<=B<=C, each a multiple of 4, up to "
                f"{gen.max_cubes} 4x4x4 cubes"
            )
        else:
            rule = ", ".join(gen.small)
        return f"{gen.title} has no topology {topology}: it comes as {rule}"
    if chips and cat.topology_chips(topology) != chips:
        return (
            f"topology {topology} is {cat.topology_chips(topology)} chips, but {accelerator} is "
            f"{chips} ({gen.topology_of(chips)})"
        )
    return None


def _machine_problem(gen: TpuFamily, machine: MachineType, chips: int, topology: str) -> str | None:
    if machine.single_host and chips != machine.chips_per_vm:
        fit = gen.default_machine_type(chips)
        instead = f": use {fit.name}" if fit is not None else ""
        return (
            f"{machine.name} is one VM of {machine.chips_per_vm} chip"
            f"{'s' if machine.chips_per_vm > 1 else ''}, but {topology} is {chips}{instead}"
        )
    if chips % machine.chips_per_vm or chips < machine.chips_per_vm:
        return (
            f"{topology} ({chips} chips) cannot be made of {machine.name} VMs of "
            f"{machine.chips_per_vm} chips each"
        )
    return None
