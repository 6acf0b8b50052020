"""The catalogue of Cloud TPU families (Google's "generations": in this code a *generation* is
a setup or workload counter): what each is called, the sizes and chip topologies
it comes in, which API offers it, and the Compute Engine machine types that hold it.

One table, ``CATALOGUE``; everything else here is derived from it (chips, hosts per slice,
the default topology of a size, the machine type a slice maps to on Compute Engine). The name
checks of ``model/names.py``, the quota and chip counts, the loader's refusals and the docs all
read it, so a family is described once.

What a name's number counts: TensorCores for v2, v3, v4, v5p and TPU7x (two a chip: ``v4-8``
is 4 chips, ``tpu7x-128`` is 64), chips for v5e and v6e (``v6e-8`` is 8). Topologies are chips
per dimension: 2D for v2, v3, v5e and v6e, 3D for v4, v5p and TPU7x.

Which API offers what (``docs/operations.md``, "Which API holds a TPU"): the Cloud TPU API
(queued resources, ``api: tpu``) is frozen: it serves v2 to v6e and will get no new
family. Compute Engine (``api: compute``: instances, and MIGs for multi-host slices)
serves v5p, v6e and TPU7x; TPU7x is offered only there (and in GKE), v5e not at all (its
``ct5lp-*`` machine types are GKE's).

Sources (no live web when written; each claim checked against the stored copies named):
- sizes and topologies: Google's "TPU v4" page (small v4 slices 2x2x1, 2x2x2, 2x2x4, 2x4x4;
  larger ones "in increments of 64 chips, with shapes that are multiples of 4 on all three
  dimensions", in increasing order; a 4096-chip pod), the "TPU v5e" page (1x1 ... 16x16),
  the regions-zones page's v2 and v3 tables (v2-8 ... v2-512, v3-8 ... v3-2048), XPK's
  ``system_characteristics.py`` (v5p up to 16x20x28, v6e 1x1 ... 16x16, TPU7x shapes) and
  axlearn's table of names (``tpu7x-8`` is 2x2x1, ``tpu7x-128`` 4x4x4);
- Compute Engine: ``/work/shared/compute-engine.md`` §0, §1.1 and §5 (machine types, chips
  per VM, TPU7x: every dimension a multiple of 4 and at most 144 4x4x4 cubes past 2x4x4,
  the boot image families; TPU7x's image family is third-party and not verified).

May: hold values and derive from them. May not: do I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Final

from reconciler.model.messages import did_you_mean
from reconciler.model.vocabulary import APIS as APIS
from reconciler.model.vocabulary import COMPUTE_API as COMPUTE_API
from reconciler.model.vocabulary import TPU_API as TPU_API

#: v4-8, v5litepod-16, v5p-128, v6e-64, tpu7x-128: a family, a hyphen, a size.
ACCELERATOR_RE: Final = re.compile(r"^((?:v[0-9]|tpu[0-9])[a-z0-9]*)-([1-9][0-9]{0,4})$")
#: 2x4, 4x4x4: chips per dimension.
TOPOLOGY_RE: Final = re.compile(r"^[1-9][0-9]{0,3}(?:x[1-9][0-9]{0,3}){1,2}$")

#: What each API is, in words a message can use.
API_WORDS: Final[Mapping[str, str]] = {
    TPU_API: "the Cloud TPU API (queued resources)",
    COMPUTE_API: "Compute Engine",
}

#: Chips in one 4x4x4 cube, the unit larger 3D slices are built of.
CUBE: Final = 64

_UBUNTU_ACCEL: Final = "projects/ubuntu-os-accelerator-images/global/images/family/"


@dataclass(frozen=True, slots=True)
class MachineType:
    """A Compute Engine machine type that holds TPU chips (the TPUs come with the type)."""

    name: str
    family: str  # its TPU family: ct6e-standard-4t -> v6e
    chips_per_vm: int
    #: True: a VM of it is a whole slice (1t, and ct6e's 8t); False: the type multi-host
    #: slices are made of, one VM per ``chips_per_vm`` chips
    single_host: bool


@dataclass(frozen=True, slots=True)
class TpuFamily:
    """One TPU family as the catalogue knows it."""

    family: str  # the prefix of its accelerator names: v5litepod, tpu7x
    title: str  # what Google's pages call it
    aliases: tuple[str, ...]  # other prefixes users write for it (Google's own among them)
    cores_per_chip: int  # 2: a name's number counts TensorCores; 1: it counts chips
    dims: int  # 2 or 3: dimensions of its topologies
    #: the topologies offered, smallest first (3D: those under one 4x4x4 cube)
    small: tuple[str, ...]
    #: 3D only: the largest slice, in 4x4x4 cubes (0: none larger than ``small``)
    max_cubes: int
    apis: tuple[str, ...]  # the APIs that offer it, its default first
    #: TPU API: most chips of a slice on one host (more: 4 chips a host)
    tpu_api_host_chips: int = 4
    machine_types: tuple[MachineType, ...] = ()  # Compute Engine's, when it offers it
    gke_machine_types: tuple[str, ...] = ()  # GKE's, named only to say they are not ours
    runtime_version: str | None = None  # TPU API: the default runtime (software) version
    image: str | None = None  # Compute Engine: the default boot image (a family)
    image_verified: bool = True  # False: ``image`` is from third-party sources only

    @property
    def names(self) -> tuple[str, ...]:
        """Every prefix that means this family, its own first."""
        return (self.family, *self.aliases)

    @property
    def topologies(self) -> tuple[str, ...]:
        """Every topology offered, smallest first (3D: one per size, the default's)."""
        return tuple(self.topology_of(self.chips(s)) or "" for s in self.sizes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The numbers its accelerator names take: v6e 1, 4, 8, ... 256."""
        chips = [_chips_of(t) for t in self.small]
        chips += [CUBE * k for k in range(1, self.max_cubes + 1)]
        return tuple(sorted({c * self.cores_per_chip for c in chips}))

    def chips(self, size: int) -> int:
        """Chips of the name with number ``size`` (which may not exist: see ``sizes``)."""
        return max(1, size // self.cores_per_chip)

    def size_of(self, chips: int) -> int:
        return chips * self.cores_per_chip

    def accelerator(self, chips: int) -> str:
        """The accelerator name of a slice of ``chips`` chips: v6e 8 -> ``v6e-8``."""
        return f"{self.family}-{self.size_of(chips)}"

    def valid_topology(self, topology: str) -> bool:
        """One the family offers: a listed one, or (3D) A<=B<=C, every dimension a
        multiple of 4 and at most ``max_cubes`` cubes."""
        if topology in self.small:
            return True
        dims = _dims(topology)
        if self.dims != 3 or len(dims) != 3 or any(d % 4 for d in dims):
            return False
        return list(dims) == sorted(dims) and prod(dims) // CUBE <= self.max_cubes

    def topology_of(self, chips: int) -> str | None:
        """The default topology of a slice of ``chips`` chips (None: there is none).

        A listed one when it has that many chips; else, 3D, the most cube-like shape of
        4x4x4 cubes: the smallest longest side, then the largest shortest side (v5p 768 chips
        -> 8x8x12, 5376 -> 12x16x28), which is how Google's and XPK's tables name them."""
        for topology in self.small:
            if _chips_of(topology) == chips:
                return topology
        if self.dims != 3 or chips % CUBE or not 1 <= chips // CUBE <= self.max_cubes:
            return None
        cubes = chips // CUBE
        shapes = [
            (a, b, cubes // (a * b))
            for a in range(1, cubes + 1)
            for b in range(a, cubes + 1)
            if cubes % (a * b) == 0 and cubes // (a * b) >= b
        ]
        a, b, c = min(shapes, key=lambda s: (s[2], -s[0]))
        return f"{4 * a}x{4 * b}x{4 * c}"

    def machine_type(self, name: str) -> MachineType | None:
        return next((m for m in self.machine_types if m.name == name), None)

    def default_machine_type(self, chips: int) -> MachineType | None:
        """Compute Engine's type for a slice of ``chips``: the one whose VM is the whole slice
        when there is one (v6e 8 -> ct6e-standard-8t, tpu7x 4 -> tpu7x-standard-4t), else the
        type multi-host slices are made of (v6e 16 -> ct6e-standard-4t, four VMs)."""
        whole = [m for m in self.machine_types if m.chips_per_vm == chips]
        if whole:
            return whole[0]
        multi = [m for m in self.machine_types if not m.single_host and chips % m.chips_per_vm == 0]
        return multi[0] if multi else None

    def tpu_api_hosts(self, chips: int) -> int:
        """Hosts (TPU VMs, SSH workers) of a TPU API slice: v4-8 1, v4-32 4, v6e-8 1,
        v5litepod-16 4: one when it fits ``tpu_api_host_chips``, else one per 4 chips."""
        return 1 if chips <= self.tpu_api_host_chips else chips // 4


def _dims(topology: str) -> tuple[int, ...]:
    return tuple(int(d) for d in topology.split("x")) if TOPOLOGY_RE.fullmatch(topology) else ()


def _chips_of(topology: str) -> int:
    dims = _dims(topology)
    return prod(dims) if dims else 0


def topology_chips(topology: str) -> int:
    """Chips in ``topology``: ``4x4x4`` -> 64 (0 when it is not a topology)."""
    return _chips_of(topology)


_2D: Final = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_3D_SMALL: Final = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")

CATALOGUE: Final[tuple[TpuFamily, ...]] = (
    TpuFamily(
        family="v2",
        title="TPU v2",
        aliases=(),
        cores_per_chip=2,
        dims=2,
        small=("2x2", "4x4", "8x8", "8x16", "16x16"),
        max_cubes=0,
        apis=(TPU_API,),
        runtime_version="tpu-ubuntu2204-base",
    ),
    TpuFamily(
        family="v3",
        title="TPU v3",
        aliases=(),
        cores_per_chip=2,
        dims=2,
        small=("2x2", "4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32"),
        max_cubes=0,
        apis=(TPU_API,),
        runtime_version="tpu-ubuntu2204-base",
    ),
    TpuFamily(
        family="v4",
        title="TPU v4",
        aliases=(),
        cores_per_chip=2,
        dims=3,
        small=_3D_SMALL,
        max_cubes=64,  # a 4096-chip pod
        apis=(TPU_API,),
        gke_machine_types=("ct4p-hightpu-4t",),
        runtime_version="tpu-ubuntu2204-base",
    ),
    TpuFamily(
        family="v5litepod",
        title="TPU v5e",
        aliases=("v5e", "v5lite"),
        cores_per_chip=1,
        dims=2,
        small=_2D,
        max_cubes=0,
        apis=(TPU_API,),
        tpu_api_host_chips=8,
        gke_machine_types=("ct5lp-hightpu-1t", "ct5lp-hightpu-4t", "ct5lp-hightpu-8t"),
        runtime_version="v2-alpha-tpuv5-lite",
    ),
    TpuFamily(
        family="v5p",
        title="TPU v5p",
        aliases=(),
        cores_per_chip=2,
        dims=3,
        small=_3D_SMALL,
        max_cubes=140,  # an 8960-chip pod (16x20x28)
        apis=(TPU_API, COMPUTE_API),
        machine_types=(MachineType("ct5p-hightpu-4t", "v5p", 4, single_host=False),),
        runtime_version="v2-alpha-tpuv5",
        image=_UBUNTU_ACCEL + "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
    ),
    TpuFamily(
        family="v6e",
        title="TPU v6e (Trillium)",
        aliases=(),
        cores_per_chip=1,
        dims=2,
        small=_2D,
        max_cubes=0,
        apis=(TPU_API, COMPUTE_API),
        tpu_api_host_chips=8,
        machine_types=(
            MachineType("ct6e-standard-1t", "v6e", 1, single_host=True),
            MachineType("ct6e-standard-4t", "v6e", 4, single_host=False),
            MachineType("ct6e-standard-8t", "v6e", 8, single_host=True),
        ),
        runtime_version="v2-alpha-tpuv6e",
        image=_UBUNTU_ACCEL + "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
    ),
    TpuFamily(
        family="tpu7x",
        title="TPU7x (Ironwood)",
        aliases=("v7x",),
        cores_per_chip=2,
        dims=3,
        small=("1x1x1", *_3D_SMALL),
        max_cubes=144,  # 9216 chips
        apis=(COMPUTE_API,),
        machine_types=(
            MachineType("tpu7x-standard-1t", "tpu7x", 1, single_host=True),
            MachineType("tpu7x-standard-4t", "tpu7x", 4, single_host=False),
        ),
        image=_UBUNTU_ACCEL + "ubuntu-accel-2404-amd64-tpu-tpu7x",
        image_verified=False,
    ),
)

#: Family or alias -> its catalogue entry.
_BY_NAME: Final[Mapping[str, TpuFamily]] = {n: g for g in CATALOGUE for n in g.names}
FAMILIES: Final[tuple[str, ...]] = tuple(g.family for g in CATALOGUE)
#: Alias -> the family it means (``v5e`` -> ``v5litepod``).
ALIASES: Final[Mapping[str, str]] = {a: g.family for g in CATALOGUE for a in g.aliases}
#: Every Compute Engine machine type of the catalogue, by name.
MACHINE_TYPES: Final[Mapping[str, MachineType]] = {
    m.name: m for g in CATALOGUE for m in g.machine_types
}
#: GKE-only machine types -> the family they hold.
GKE_MACHINE_TYPES: Final[Mapping[str, str]] = {
    m: g.family for g in CATALOGUE for m in g.gke_machine_types
}
#: The families each API offers, in catalogue order.
OFFERED: Final[Mapping[str, tuple[str, ...]]] = {
    api: tuple(g.family for g in CATALOGUE if api in g.apis) for api in APIS
}


def family_entry(name: str) -> TpuFamily | None:
    """The catalogue entry a family or alias names (``v5e`` and ``v5litepod`` alike)."""
    return _BY_NAME.get(name)


def split(accelerator: str) -> tuple[str, int] | None:
    """``v6e-64`` -> (``v6e``, 64) as written; None when it is not shaped like a name."""
    m = ACCELERATOR_RE.fullmatch(accelerator)
    return (m.group(1), int(m.group(2))) if m else None


def family_of(accelerator: str) -> str | None:
    """The family an accelerator name is of, aliases read (``v5e-8`` -> ``v5litepod``);
    the prefix as written for a family not catalogued; None when it is not a name."""
    parts = split(accelerator)
    if parts is None:
        return None
    return ALIASES.get(parts[0], parts[0])


def canonical(accelerator: str) -> str:
    """The name the APIs know: ``v5e-8`` -> ``v5litepod-8``; others unchanged."""
    parts = split(accelerator)
    if parts is None or parts[0] not in ALIASES:
        return accelerator
    return f"{ALIASES[parts[0]]}-{parts[1]}"


#: Family -> the numbers its names take (``TpuFamily.sizes``, computed once).
_SIZES: Final[Mapping[str, frozenset[int]]] = {g.family: frozenset(g.sizes) for g in CATALOGUE}


def lookup(accelerator: str) -> tuple[TpuFamily, int] | None:
    """(family, chips) of a name that exists (aliases read); None otherwise."""
    parts = split(accelerator)
    gen = family_entry(parts[0]) if parts else None
    if parts is None or gen is None or parts[1] not in _SIZES[gen.family]:
        return None
    return gen, gen.chips(parts[1])


def offered_by(family: str, api: str) -> bool:
    gen = family_entry(family)
    return gen is not None and api in gen.apis


def default_api(family: str) -> str:
    """The API a family's slots use when nothing says: the TPU API where it serves it,
    else Compute Engine (TPU7x)."""
    gen = family_entry(family)
    return gen.apis[0] if gen is not None else TPU_API


@dataclass(frozen=True, slots=True)
class Shape:
    """What one slice of a slot is, resolved: the controller reads these, never re-derives.

    ``accelerator`` is the TPU API's name for it (also on Compute Engine, where it names the
    size in quotas, history and messages); ``machine_type`` is set on Compute Engine only."""

    accelerator: str
    family: str
    chips: int
    topology: str
    api: str
    hosts: int  # VMs (SSH workers) in one slice
    machine_type: str | None = None

    @property
    def single_host(self) -> bool:
        return self.hosts == 1


def tpu_api_shape(gen: TpuFamily, chips: int) -> Shape:
    """A slice of ``chips`` held through the TPU API (its default topology)."""
    return Shape(
        accelerator=gen.accelerator(chips),
        family=gen.family,
        chips=chips,
        topology=gen.topology_of(chips) or "",
        api=TPU_API,
        hosts=gen.tpu_api_hosts(chips),
    )


def compute_shape(gen: TpuFamily, machine: MachineType, topology: str) -> Shape:
    """A slice of ``topology`` on VMs of ``machine`` (checked by the caller: see
    ``model/load_shape.py``): one host per ``chips_per_vm`` chips."""
    chips = topology_chips(topology)
    return Shape(
        accelerator=gen.accelerator(chips),
        family=gen.family,
        chips=chips,
        topology=topology,
        api=COMPUTE_API,
        hosts=max(1, chips // machine.chips_per_vm),
        machine_type=machine.name,
    )


# --- what is wrong with a name (the loader's words) ------------------------------------------


def _sizes_text(gen: TpuFamily) -> str:
    """``v6e-1, v6e-4, ... or v6e-256``; a 3D family's cube multiples in one phrase."""
    small = [gen.size_of(topology_chips(t)) for t in gen.small]
    names = [f"{gen.family}-{s}" for s in small]
    if gen.max_cubes:
        step = gen.size_of(CUBE)
        return (
            f"{', '.join(names)}, then every multiple of {step} up to "
            f"{gen.family}-{gen.size_of(CUBE * gen.max_cubes)}"
        )
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def family_problem(family: str) -> str | None:
    """Why ``family`` names no family, with a "did you mean"; None when it names one."""
    if family_entry(family) is not None:
        return None
    known = [n for g in CATALOGUE for n in g.names]
    near = did_you_mean(family, known)
    hint = f" (did you mean {ALIASES.get(near, near)!r}?)" if near else ""
    listed = ", ".join(
        g.family + (f" ({', '.join(g.aliases)})" if g.aliases else "") for g in CATALOGUE
    )
    return f"no TPU generation is called {family!r}{hint}; the generations are {listed}"


def accelerator_problem(accelerator: str) -> str | None:
    """Why ``accelerator`` (shaped like a name) names no TPU that exists: an unknown
    family, or a size it does not come in (with the sizes and the nearest); None when it
    exists (aliases too: ``v5e-8`` is ``v5litepod-8``)."""
    parts = split(accelerator)
    if parts is None:
        return f"{accelerator!r} is not an accelerator type like v4-8, v6e-64 or tpu7x-128"
    written, size = parts
    gen = family_entry(written)
    if gen is None:
        problem = family_problem(written)
        return f"unknown accelerator {accelerator!r}: {problem}"
    if size in _SIZES[gen.family]:
        return None
    sizes = _SIZES[gen.family]
    counts = ""
    if gen.cores_per_chip > 1:  # a chip count written where TensorCores are counted?
        counts = f" (the number counts TensorCores, {gen.cores_per_chip} a chip)"
        if size * gen.cores_per_chip in sizes:
            counts = counts[:-1] + f": {size} chips is {gen.accelerator(size)})"
    nearest = (
        gen.size_of(size)
        if gen.size_of(size) in sizes
        else min(sorted(sizes), key=lambda s: abs(s - size))
    )
    meant = f"{gen.family}-{nearest}"
    return (
        f"accelerator {accelerator!r} does not exist: {gen.title} comes as "
        f"{_sizes_text(gen)}{counts} (did you mean {meant!r}?)"
    )
