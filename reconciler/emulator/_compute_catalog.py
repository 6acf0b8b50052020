"""What the emulated Compute Engine knows without being told: its TPU machine types, topology
arithmetic, resource links, timestamps and ids.

Values only: no clock, no I/O. Each fact is tagged as docs/emulator.md does: [V] read in
Google's SDK or docs (via /work/shared/compute-engine.md), [3P] reported by a third party,
[I] the emulator's own choice.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from typing import Final

from reconciler.model.quotas import region_of

#: The host Compute Engine writes into every ``selfLink`` / ``targetLink`` [V].
LINK_ROOT: Final = "https://www.googleapis.com/compute/v1/"
#: The path prefix of every route (gcloud appends it to a bare endpoint override) [V].
PREFIX: Final = "/compute/v1/"


@dataclass(frozen=True, slots=True)
class MachineType:
    name: str
    family: str  # "tpu7x" | "v6e" | "v5p": the quota family
    chips: int  # TPU chips per VM
    tpu_family: str  # the ``tpu_family`` quota dimension


#: The TPU machine types Compute Engine serves [V: compute-engine.md §0, §5].
MACHINE_TYPES: Final = {
    m.name: m
    for m in (
        MachineType("tpu7x-standard-1t", "tpu7x", 1, "tpu7x"),
        MachineType("tpu7x-standard-4t", "tpu7x", 4, "tpu7x"),
        MachineType("ct6e-standard-1t", "v6e", 1, "CT6E"),
        MachineType("ct6e-standard-4t", "v6e", 4, "CT6E"),
        MachineType("ct6e-standard-8t", "v6e", 8, "CT6E"),
        MachineType("ct5p-hightpu-4t", "v5p", 4, "CT5P"),
    )
}
#: Machine types that exist in the catalogue but that Compute Engine refuses to create: v5e
#: is GKE's and the TPU API's only [V that it is refused; 3P the words].
REFUSED_PREFIXES: Final = ("ct5lp-",)

_TOPOLOGY: Final = re.compile(r"^[1-9][0-9]*(?:x[1-9][0-9]*){1,2}$")
_NAME: Final = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


def valid_name(name: object) -> bool:
    """RFC 1035, 1-63 characters: what every Compute Engine resource name must be [V]."""
    return isinstance(name, str) and bool(_NAME.fullmatch(name))


def topology_chips(topology: str) -> int | None:
    """``"4x4x4"`` -> 64; None when it is not an AxB[xC] topology."""
    if not _TOPOLOGY.fullmatch(topology):
        return None
    return math.prod(int(d) for d in topology.split("x"))


def hosts_per_slice(topology: str, machine: MachineType) -> int | None:
    """Chips in the topology / chips per VM [V]; None when they do not divide."""
    chips = topology_chips(topology)
    if chips is None or chips % machine.chips:
        return None
    return chips // machine.chips


def last_segment(value: str) -> str:
    return value.rstrip("/").rsplit("/", 1)[-1]


def relative(value: str) -> str:
    """A link or partial path as ``zones/Z/...`` / ``global/...``: everything after
    ``projects/P/`` (or the value itself when it names no project)."""
    path = value.split("://", 1)[-1]
    m = re.search(r"(?:^|/)projects/[^/]+/(.*)$", path)
    return m.group(1) if m else path.lstrip("/")


def link(project: str, path: str) -> str:
    """``zones/Z/instances/N`` -> its full ``selfLink``."""
    return f"{LINK_ROOT}projects/{project}/{path}"


def scope_path(scope: str, location: str | None) -> str:
    """``("zones", "us-central1-a")`` -> ``zones/us-central1-a``; ``("global", None)`` ->
    ``global``."""
    return scope if location is None else f"{scope}/{location}"


def region_path(zone: str) -> str:
    return f"regions/{region_of(zone)}"


def stamp(wall: float) -> str:
    """RFC 3339 with milliseconds and an offset, as Compute Engine writes its times [V shape;
    I the UTC offset (Google writes Pacific time)]."""
    millis = int(wall * 1000)
    moment = _dt.datetime.fromtimestamp(millis // 1000, tz=_dt.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{millis % 1000:03d}+00:00"


def resource_id(seq: int, kind: int) -> str:
    """A 19-digit uint64 id, unique per resource and incarnation (rendered as a string, as
    JSON carries uint64)."""
    return str(kind * 10**18 + 10**17 + seq)
