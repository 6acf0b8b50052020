"""The catalogue of TPU generations (``model/accelerators.py``), as tables: what each name is
(chips, topology, hosts, the machine type it maps to on Compute Engine), which sizes exist,
which API offers which generation, and the words for a name that does not exist. The helpers
that read it (``model/names``, ``model/quotas``, ``model/tpu_zones``) keep their answers."""

from __future__ import annotations

import pytest

from reconciler.model import accelerators as cat
from reconciler.model import names, quotas, tpu_zones

# (name, family, chips, default topology, hosts of a TPU API slice)
NAMES = [
    ("v2-8", "v2", 4, "2x2", 1),
    ("v2-512", "v2", 256, "16x16", 64),
    ("v3-32", "v3", 16, "4x4", 4),
    ("v3-2048", "v3", 1024, "32x32", 256),
    ("v4-8", "v4", 4, "2x2x1", 1),
    ("v4-16", "v4", 8, "2x2x2", 2),
    ("v4-32", "v4", 16, "2x2x4", 4),
    ("v4-64", "v4", 32, "2x4x4", 8),
    ("v4-128", "v4", 64, "4x4x4", 16),
    ("v4-1536", "v4", 768, "8x8x12", 192),
    ("v4-4096", "v4", 2048, "8x16x16", 512),
    ("v5litepod-1", "v5litepod", 1, "1x1", 1),
    ("v5litepod-4", "v5litepod", 4, "2x2", 1),
    ("v5litepod-8", "v5litepod", 8, "2x4", 1),
    ("v5litepod-16", "v5litepod", 16, "4x4", 4),
    ("v5litepod-256", "v5litepod", 256, "16x16", 64),
    ("v5e-8", "v5litepod", 8, "2x4", 1),  # Google's own name for it
    ("v5p-8", "v5p", 4, "2x2x1", 1),
    ("v5p-128", "v5p", 64, "4x4x4", 16),
    ("v5p-768", "v5p", 384, "4x8x12", 96),
    ("v5p-10752", "v5p", 5376, "12x16x28", 1344),
    ("v5p-12288", "v5p", 6144, "16x16x24", 1536),
    ("v5p-17920", "v5p", 8960, "16x20x28", 2240),
    ("v6e-1", "v6e", 1, "1x1", 1),
    ("v6e-4", "v6e", 4, "2x2", 1),
    ("v6e-8", "v6e", 8, "2x4", 1),
    ("v6e-16", "v6e", 16, "4x4", 4),
    ("v6e-64", "v6e", 64, "8x8", 16),
    ("v6e-256", "v6e", 256, "16x16", 64),
    ("tpu7x-2", "tpu7x", 1, "1x1x1", 1),
    ("tpu7x-8", "tpu7x", 4, "2x2x1", 1),
    ("tpu7x-128", "tpu7x", 64, "4x4x4", 16),
    ("tpu7x-13824", "tpu7x", 6912, "12x24x24", 1728),
    ("v7x-8", "tpu7x", 4, "2x2x1", 1),
]


@pytest.mark.parametrize(("name", "family", "chips", "topology", "hosts"), NAMES)
def test_what_each_name_is(name: str, family: str, chips: int, topology: str, hosts: int) -> None:
    found = cat.lookup(name)
    assert found is not None
    gen, got_chips = found
    assert (gen.family, got_chips, gen.topology_of(got_chips)) == (family, chips, topology)
    assert cat.tpu_api_shape(gen, got_chips).hosts == hosts
    # the helpers everyone else calls answer the same, from the same table
    assert (names.accelerator_family(name), names.chip_count(name)) == (family, chips)
    assert names.worker_count(name) == hosts


# (name, machine type, topology, hosts): the Compute Engine slice a name maps to
ON_COMPUTE = [
    ("tpu7x-2", "tpu7x-standard-1t", "1x1x1", 1),
    ("tpu7x-8", "tpu7x-standard-4t", "2x2x1", 1),
    ("tpu7x-16", "tpu7x-standard-4t", "2x2x2", 2),
    ("tpu7x-128", "tpu7x-standard-4t", "4x4x4", 16),
    ("tpu7x-18432", "tpu7x-standard-4t", "16x24x24", 2304),
    ("v6e-1", "ct6e-standard-1t", "1x1", 1),
    ("v6e-4", "ct6e-standard-4t", "2x2", 1),
    ("v6e-8", "ct6e-standard-8t", "2x4", 1),
    ("v6e-16", "ct6e-standard-4t", "4x4", 4),
    ("v6e-256", "ct6e-standard-4t", "16x16", 64),
    ("v5p-8", "ct5p-hightpu-4t", "2x2x1", 1),
    ("v5p-128", "ct5p-hightpu-4t", "4x4x4", 16),
]


@pytest.mark.parametrize(("name", "machine_type", "topology", "hosts"), ON_COMPUTE)
def test_the_compute_engine_slice_of_each_name(
    name: str, machine_type: str, topology: str, hosts: int
) -> None:
    found = cat.lookup(name)
    assert found is not None
    gen, chips = found
    machine = gen.default_machine_type(chips)
    assert machine is not None
    shape = cat.compute_shape(gen, machine, gen.topology_of(chips) or "")
    assert (shape.machine_type, shape.topology, shape.hosts) == (machine_type, topology, hosts)
    assert (shape.accelerator, shape.api, shape.single_host) == (name, "compute", hosts == 1)


# (family, every size it comes in)
SIZES = [
    ("v2", (8, 32, 128, 256, 512)),
    ("v3", (8, 32, 64, 128, 256, 512, 1024, 2048)),
    ("v5litepod", (1, 4, 8, 16, 32, 64, 128, 256)),
    ("v6e", (1, 4, 8, 16, 32, 64, 128, 256)),
]
# (family, its smallest sizes, its largest, how many): then every multiple of a 4x4x4 cube
CUBED = [
    ("v4", (8, 16, 32, 64, 128, 256, 384), 8192, 4 + 64),  # a 4096-chip pod
    ("v5p", (8, 16, 32, 64, 128, 256, 384), 17920, 4 + 140),  # 8960 chips, 16x20x28
    ("tpu7x", (2, 8, 16, 32, 64, 128, 256), 18432, 5 + 144),  # at most 144 cubes
]


@pytest.mark.parametrize(("family", "sizes"), SIZES)
def test_the_sizes_of_2d_generations(family: str, sizes: tuple[int, ...]) -> None:
    gen = cat.family_entry(family)
    assert gen is not None and gen.sizes == sizes


@pytest.mark.parametrize(("family", "first", "last", "count"), CUBED)
def test_the_sizes_of_3d_generations(
    family: str, first: tuple[int, ...], last: int, count: int
) -> None:
    gen = cat.family_entry(family)
    assert gen is not None
    assert (gen.sizes[: len(first)], gen.sizes[-1], len(gen.sizes)) == (first, last, count)


@pytest.mark.parametrize("gen", cat.CATALOGUE, ids=lambda g: g.family)
def test_every_size_has_a_valid_default_topology_of_its_chips(gen: cat.TpuFamily) -> None:
    for size in gen.sizes:
        chips = gen.chips(size)
        topology = gen.topology_of(chips)
        assert topology is not None and gen.valid_topology(topology), (size, topology)
        assert cat.topology_chips(topology) == chips
        assert cat.lookup(f"{gen.family}-{size}") == (gen, chips)
        machine = gen.default_machine_type(chips)
        if cat.COMPUTE_API in gen.apis:  # every size has a Compute Engine machine type
            assert machine is not None and chips % machine.chips_per_vm == 0, size
        else:
            assert not gen.machine_types


# (family, API, offered): the TPU API is frozen at v6e; Compute Engine serves v5p, v6e, TPU7x
OFFERED = [
    ("v2", "tpu", True),
    ("v3", "tpu", True),
    ("v4", "tpu", True),
    ("v5litepod", "tpu", True),
    ("v5p", "tpu", True),
    ("v6e", "tpu", True),
    ("tpu7x", "tpu", False),
    ("v2", "compute", False),
    ("v3", "compute", False),
    ("v4", "compute", False),
    ("v5litepod", "compute", False),
    ("v5e", "compute", False),
    ("v5p", "compute", True),
    ("v6e", "compute", True),
    ("tpu7x", "compute", True),
]


@pytest.mark.parametrize(("family", "api", "offered"), OFFERED)
def test_which_api_offers_which_generation(family: str, api: str, offered: bool) -> None:
    assert cat.offered_by(family, api) is offered


@pytest.mark.parametrize(
    ("family", "api"),
    [
        ("v2", "tpu"),
        ("v4", "tpu"),
        ("v5e", "tpu"),
        ("v5p", "tpu"),
        ("v6e", "tpu"),
        ("tpu7x", "compute"),
    ],
)
def test_the_default_api_of_each_generation(family: str, api: str) -> None:
    assert cat.default_api(family) == api


# (family, topology, valid)
TOPOLOGIES = [
    ("v6e", "4x4", True),
    ("v6e", "4x2", False),  # written smaller side first, as Google does
    ("v6e", "3x3", False),
    ("v6e", "2x2x1", False),
    ("v5p", "2x2x1", True),
    ("v5p", "4x4x20", True),
    ("v5p", "4x20x4", False),  # sides in increasing order
    ("v5p", "4x4x6", False),  # a multiple of 4 on every side past 2x4x4
    ("v5p", "16x20x28", True),  # 140 cubes, the pod
    ("v5p", "16x20x32", False),  # 160 cubes
    ("tpu7x", "1x1x1", True),
    ("tpu7x", "4x2x1", False),  # "4x2x1 is rejected for tpu7x-standard-4t; use 2x2x2"
    ("tpu7x", "4x4x4", True),
    ("tpu7x", "16x24x24", True),  # 144 cubes
    ("tpu7x", "20x24x24", False),  # 180
    ("tpu7x", "banana", False),
]


@pytest.mark.parametrize(("family", "topology", "valid"), TOPOLOGIES)
def test_valid_topologies(family: str, topology: str, valid: bool) -> None:
    gen = cat.family_entry(family)
    assert gen is not None
    assert gen.valid_topology(topology) is valid


# (machine type, family, chips per VM, a VM is a whole slice)
MACHINES = [
    ("ct5p-hightpu-4t", "v5p", 4, False),
    ("ct6e-standard-1t", "v6e", 1, True),
    ("ct6e-standard-4t", "v6e", 4, False),
    ("ct6e-standard-8t", "v6e", 8, True),
    ("tpu7x-standard-1t", "tpu7x", 1, True),
    ("tpu7x-standard-4t", "tpu7x", 4, False),
]


def test_the_machine_types() -> None:
    assert [
        (m.name, m.family, m.chips_per_vm, m.single_host) for m in cat.MACHINE_TYPES.values()
    ] == MACHINES
    assert cat.GKE_MACHINE_TYPES["ct5lp-hightpu-4t"] == "v5litepod"  # GKE's, not ours


# (written, what is wrong: every phrase in the message)
WRONG = [
    ("v6e-7", ["'v6e-7' does not exist", "v6e-1, v6e-4, v6e-8", "or v6e-256", "'v6e-8'?"]),
    ("v5e-7", ["'v5e-7' does not exist", "v5litepod-1", "did you mean 'v5litepod-8'?"]),
    ("v4-4", ["TensorCores, 2 a chip: 4 chips is v4-8", "did you mean 'v4-8'?"]),
    ("tpu7x-4", ["4 chips is tpu7x-8", "did you mean 'tpu7x-8'?"]),
    ("v5p-100", ["every multiple of 128 up to v5p-17920", "did you mean 'v5p-128'?"]),
    ("v9-8", ["unknown accelerator 'v9-8'", "no TPU generation is called 'v9'"]),
    ("v6-8", ["no TPU generation is called 'v6' (did you mean 'v6e'?)"]),
    ("v5lite-3", ["did you mean 'v5litepod-4'?"]),
]


@pytest.mark.parametrize(("written", "phrases"), WRONG)
def test_names_that_do_not_exist_say_what_does(written: str, phrases: list[str]) -> None:
    problem = cat.accelerator_problem(written)
    assert problem is not None
    for phrase in phrases:
        assert phrase in problem, problem


@pytest.mark.parametrize("written", ["v4-8", "v5e-8", "v5lite-16", "v7x-128", "tpu7x-2"])
def test_names_that_exist_have_no_problem(written: str) -> None:
    assert cat.accelerator_problem(written) is None


@pytest.mark.parametrize(
    ("written", "sent"),
    [("v5e-8", "v5litepod-8"), ("v5lite-16", "v5litepod-16"), ("v7x-8", "tpu7x-8")],
)
def test_googles_spellings_are_read_as_the_apis_names(written: str, sent: str) -> None:
    assert cat.canonical(written) == sent
    assert cat.canonical(sent) == sent


# --- the helpers that read the catalogue ------------------------------------------------------


@pytest.mark.parametrize(
    ("quota", "about"),
    [
        ("TPUV6EPreemptiblePerProjectPerZoneForTPUAPI", ("v6e", "spot")),
        ("TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI", ("v4", "spot")),
        ("TPUV5sLitepodPerProjectPerZoneForTPUAPI", ("v5litepod", "on-demand")),
        ("TPUV5PPerProjectPerZoneForTPUAPI", ("v5p", "on-demand")),
        ("TPUV9XPerProjectPerZoneForTPUAPI", ("v9x", "on-demand")),  # not catalogued: as is
    ],
)
def test_quota_ids_name_the_catalogues_families(quota: str, about: tuple[str, str]) -> None:
    assert quotas.family_mode_of(quota) == about


def test_every_zone_known_to_offer_a_family_exists() -> None:
    for family, zones in tpu_zones.ZONES_BY_FAMILY.items():
        assert cat.family_entry(family) is not None, family
        assert zones <= tpu_zones.KNOWN_ZONES, zones - tpu_zones.KNOWN_ZONES


@pytest.mark.parametrize(
    ("zone", "phrase"),
    [
        ("us-wset4-a", "is not a known zone (did you mean 'us-west4-a'?)"),
        ("us-west4-z", "us-west4's zones are us-west4-a, us-west4-b and us-west4-c"),
        ("mars-north1-z", "is not a known zone;"),
        ("us-central2-b", None),
        ("europe-west4-a", None),
    ],
)
def test_zones_that_do_not_exist(zone: str, phrase: str | None) -> None:
    problem = tpu_zones.zone_problem(zone)
    if phrase is None:
        assert problem is None
    else:
        assert problem is not None and phrase in problem
        assert "settings.allow_unknown_zones: true" in problem


def test_the_v5e_spelling_finds_its_zones() -> None:
    assert tpu_zones.family_of("v5e-8") == "v5litepod"
    assert tpu_zones.known_to_offer("us-central1-c", "tpu7x-8") is True
