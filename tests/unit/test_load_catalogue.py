"""What a slot is and which API holds it, as the loader reads it (``model/load_shape.py``,
``model/load_resolve.py``): the resolved slot for each way of writing it, and every mistake
as ``desired.yaml:LINE:COL: message`` with its fix: names that do not exist, zones that do
not exist, a generation the API named does not offer, keys that belong to the other API."""

from __future__ import annotations

import pytest
from ruamel.yaml import YAML

from reconciler.errors import InvalidDesiredState
from reconciler.model.desired import Desired
from reconciler.model.load import parse_desired
from reconciler.model.resolved import format_resolved

H = "project: my-project-123\n"
IMAGE_2204 = (
    "projects/ubuntu-os-accelerator-images/global/images/family/"
    "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
)
IMAGE_7X = (
    "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x"
)


def load(text: str, env: dict[str, str] | None = None) -> Desired:
    return parse_desired(text, "desired.yaml", env)


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(InvalidDesiredState) as info:
        load(text, env)
    return [str(d).removeprefix("desired.yaml:") for d in info.value.diagnostics]


def slot(body: str) -> str:
    return H + "slots:\n  - {name: a, zone: " + body + ", want: held}\n"


# (the slot's keys, then what it resolves to: api, accelerator, machine type, topology,
# hosts per slice, chips per slice, runtime version, image)
RESOLVED = [
    (
        "us-central2-b, accelerator: v4-8",
        ("tpu", "v4-8", None, "2x2x1", 1, 4, "tpu-ubuntu2204-base", None),
    ),
    (
        "us-central2-b, accelerator: v4-32",
        ("tpu", "v4-32", None, "2x2x4", 4, 16, "tpu-ubuntu2204-base", None),
    ),
    (
        "us-west4-a, accelerator: v5e-8",
        ("tpu", "v5litepod-8", None, "2x4", 1, 8, "v2-alpha-tpuv5-lite", None),
    ),
    (
        "us-east5-b, accelerator: v6e-16",
        ("tpu", "v6e-16", None, "4x4", 4, 16, "v2-alpha-tpuv6e", None),
    ),
    (
        "us-east5-b, accelerator: v6e-16, topology: 4x4",  # the default: harmless
        ("tpu", "v6e-16", None, "4x4", 4, 16, "v2-alpha-tpuv6e", None),
    ),
    (
        "us-central1-c, accelerator: tpu7x-8",
        ("compute", "tpu7x-8", "tpu7x-standard-4t", "2x2x1", 1, 4, "", IMAGE_7X),
    ),
    (
        "us-central1-c, accelerator: tpu7x-128",
        ("compute", "tpu7x-128", "tpu7x-standard-4t", "4x4x4", 16, 64, "", IMAGE_7X),
    ),
    (
        "us-central1-c, accelerator: v7x-2",
        ("compute", "tpu7x-2", "tpu7x-standard-1t", "1x1x1", 1, 1, "", IMAGE_7X),
    ),
    (
        "us-central1-c, machine_type: tpu7x-standard-4t, topology: 4x4x4",
        ("compute", "tpu7x-128", "tpu7x-standard-4t", "4x4x4", 16, 64, "", IMAGE_7X),
    ),
    (
        "us-central1-c, accelerator: tpu7x-512, topology: 4x4x16",  # another shape, same chips
        ("compute", "tpu7x-512", "tpu7x-standard-4t", "4x4x16", 64, 256, "", IMAGE_7X),
    ),
    (
        "us-central1-c, machine_type: tpu7x-standard-4t",  # one VM
        ("compute", "tpu7x-8", "tpu7x-standard-4t", "2x2x1", 1, 4, "", IMAGE_7X),
    ),
    (
        "us-east5-b, accelerator: v6e-8, api: compute",
        ("compute", "v6e-8", "ct6e-standard-8t", "2x4", 1, 8, "", IMAGE_2204),
    ),
    (
        "us-east5-b, accelerator: v6e-8, machine_type: ct6e-standard-4t",  # two VMs of 4
        ("compute", "v6e-8", "ct6e-standard-4t", "2x4", 2, 8, "", IMAGE_2204),
    ),
    (
        "us-east5-b, machine_type: ct6e-standard-4t, topology: 4x4",
        ("compute", "v6e-16", "ct6e-standard-4t", "4x4", 4, 16, "", IMAGE_2204),
    ),
    (
        "us-east5-a, accelerator: v5p-8, api: compute",
        ("compute", "v5p-8", "ct5p-hightpu-4t", "2x2x1", 1, 4, "", IMAGE_2204),
    ),
    (
        "us-east5-b, accelerator: v6e-8, api: compute, image: projects/my-project/global/images/x",
        (
            "compute",
            "v6e-8",
            "ct6e-standard-8t",
            "2x4",
            1,
            8,
            "",
            "projects/my-project/global/images/x",
        ),
    ),
]


@pytest.mark.parametrize(("body", "want"), RESOLVED, ids=[r[0] for r in RESOLVED])
def test_each_way_of_writing_a_slot_resolves_to_its_shape(
    body: str, want: tuple[object, ...]
) -> None:
    (s,) = load(slot(body)).slots
    got = (s.api, s.accelerator, s.machine_type, s.topology, s.hosts, s.chips)
    assert (*got, s.runtime_version, s.image) == want


# (id, text, every problem as it is printed)
CASES: list[tuple[str, str, list[str]]] = [
    (
        "size-that-does-not-exist",
        slot("us-east5-b, accelerator: v6e-7"),
        [
            "3:46: accelerator 'v6e-7' does not exist: TPU v6e (Trillium) comes as v6e-1, "
            "v6e-4, v6e-8, v6e-16, v6e-32, v6e-64, v6e-128 or v6e-256 (did you mean 'v6e-8'?)"
        ],
    ),
    (
        "generation-that-does-not-exist",
        slot("us-east5-b, accelerator: v6-8"),
        [
            "3:46: unknown accelerator 'v6-8': no TPU generation is called 'v6' (did you mean "
            "'v6e'?); the generations are v2, v3, v4, v5litepod (v5e, v5lite), v5p, v6e, "
            "tpu7x (v7x)"
        ],
    ),
    (
        "zone-typo",
        slot("us-wset4-a, accelerator: v5litepod-8"),
        [
            "3:21: zone 'us-wset4-a' is not a known zone (did you mean 'us-west4-a'?); for a "
            "zone newer than tpu-reconciler's list, set settings.allow_unknown_zones: true"
        ],
    ),
    (
        "zone-letter",
        slot("us-west4-z, accelerator: v5litepod-8"),
        [
            "3:21: zone 'us-west4-z' does not exist: us-west4's zones are us-west4-a, "
            "us-west4-b and us-west4-c; for a zone newer than tpu-reconciler's list, set "
            "settings.allow_unknown_zones: true"
        ],
    ),
    (
        "zones-everywhere",
        H + "settings:\n  subnets: {europe-wset4-a: x}\ngenerate:\n"
        "  - {zones: [us-east5-b, europe-wst4-b], accelerators: {v6e-8: 1}, want: held}\n"
        "quotas:\n  - {family: v6e, mode: spot, region: us-est5, chips: 8}\n",
        [
            "3:13: zone 'europe-wset4-a' is not a known zone (did you mean 'europe-west4-a'?); "
            "for a zone newer than tpu-reconciler's list, set settings.allow_unknown_zones: true",
            "5:26: zone 'europe-wst4-b' is not a known zone (did you mean 'europe-west4-b'?); for "
            "a zone newer than tpu-reconciler's list, set settings.allow_unknown_zones: true",
            "7:39: region 'us-est5' is not a known region (did you mean 'us-east5'?); for a "
            "region newer than tpu-reconciler's list, set settings.allow_unknown_zones: true",
        ],
    ),
    (
        "tpu7x-on-the-tpu-api",
        slot("us-central1-c, accelerator: tpu7x-8, api: tpu"),
        [
            "3:63: the TPU API does not offer TPU7x (Ironwood): it is frozen at v2 to v6e; tpu7x "
            "is held through Compute Engine: write api: compute, or leave api out"
        ],
    ),
    (
        "v5e-on-compute-engine",
        slot("us-west4-a, accelerator: v5e-8, api: compute"),
        [
            "3:58: Compute Engine does not offer TPU v5e (it offers v5p, v6e and tpu7x); "
            "v5litepod is held through the TPU API: write api: tpu, or leave api out"
        ],
    ),
    (
        "v4-on-compute-engine",
        slot("us-central2-b, accelerator: v4-8, api: compute"),
        [
            "3:60: Compute Engine does not offer TPU v4 (it offers v5p, v6e and tpu7x); v4 is "
            "held through the TPU API: write api: tpu, or leave api out"
        ],
    ),
    (
        "gke-machine-type",
        slot("us-west4-a, machine_type: ct5lp-hightpu-4t"),
        [
            "3:47: machine type 'ct5lp-hightpu-4t' is GKE's: Compute Engine does not offer TPU "
            "v5e; write accelerator: v5litepod-N (api: tpu) instead"
        ],
    ),
    (
        "runtime-version-on-compute-engine",
        H + "slots:\n  - name: a\n    zone: us-central1-c\n    accelerator: tpu7x-8\n"
        "    runtime_version: tpu-ubuntu2204-base\n    want: held\n",
        [
            "6:5: runtime_version is the TPU API's software; on api: compute the software is the "
            f"boot image (image:, default {IMAGE_7X}): remove runtime_version"
        ],
    ),
    (
        "image-on-the-tpu-api",
        slot("us-east5-b, accelerator: v6e-8, image: projects/my-project/global/images/x"),
        [
            "3:53: image is the boot disk of api: compute; on the TPU API the software is "
            "runtime_version"
        ],
    ),
    (
        "machine-type-with-api-tpu",
        slot("us-east5-b, machine_type: ct6e-standard-8t, api: tpu"),
        [
            "3:70: machine type ct6e-standard-8t is Compute Engine's: write api: compute, or "
            "accelerator alone for the TPU API"
        ],
    ),
    (
        "topology-of-other-chips",
        slot("us-central1-c, accelerator: tpu7x-128, topology: 4x4x8"),
        ["3:70: topology 4x4x8 is 128 chips, but tpu7x-128 is 64 (4x4x4)"],
    ),
    (
        "topology-the-generation-has-not",
        slot("us-central1-c, machine_type: tpu7x-standard-4t, topology: 4x2x1"),
        [
            "3:79: TPU7x (Ironwood) has no topology 4x2x1: it comes as 1x1x1, 2x2x1, 2x2x2, "
            "2x2x4, 2x4x4, or AxBxC with A<=B<=C, each a multiple of 4, up to 144 4x4x4 cubes"
        ],
    ),
    (
        "topology-on-the-tpu-api",
        slot("us-east5-b, accelerator: v6e-16, topology: 2x8"),
        [
            "3:64: api: tpu sends the accelerator type alone, whose topology is 4x4; another "
            "topology needs api: compute"
        ],
    ),
    (
        "one-vm-machine-type-for-a-bigger-slice",
        slot("us-east5-b, accelerator: v6e-16, machine_type: ct6e-standard-8t"),
        ["3:68: ct6e-standard-8t is one VM of 8 chips, but 4x4 is 16: use ct6e-standard-4t"],
    ),
    (
        "machine-type-of-another-generation",
        slot("us-east5-b, accelerator: v6e-16, machine_type: tpu7x-standard-4t"),
        [
            "3:68: machine type tpu7x-standard-4t holds TPU7x (Ironwood), not v6e-16: write one "
            "of them (or a v6e machine type)"
        ],
    ),
    (
        "neither-accelerator-nor-machine-type",
        slot("us-east5-b"),
        ["3:12: this slot needs accelerator (like v6e-8), or machine_type (and topology)"],
    ),
    (
        # not also "needs accelerator": that follows from the typo
        "mistyped-accelerator",
        slot("us-east5-b, acelerator: v6e-8"),
        ["3:33: unknown key 'acelerator' (did you mean 'accelerator'?)"],
    ),
    (
        "generator-with-an-api-one-of-its-types-is-not-on",
        H + "generate:\n  - zones: [us-east5-b]\n    api: compute\n"
        "    accelerators: {v6e-8: 1, v5litepod-8: 1}\n    want: held\n",
        [
            "4:10: v5litepod-8: Compute Engine does not offer TPU v5e (it offers v5p, v6e and "
            "tpu7x); v5litepod is held through the TPU API: write api: tpu, or leave api out"
        ],
    ),
    (
        "settings-per-family",
        H
        + "settings:\n  apis: {v5e: compute}\n  images: {v4: projects/my-project/global/images/x}\n"
        "  runtime_versions: {tpu7x: my-runtime}\n",
        [
            "3:9: Compute Engine does not offer TPU v5e (it offers v5p, v6e and tpu7x); "
            "v5litepod is held through the TPU API: map it to tpu, or remove it",
            "4:12: Compute Engine does not offer TPU v4: its software is a runtime version "
            "(settings.runtime_versions.v4)",
            "5:22: the TPU API does not offer TPU7x (Ironwood): its software is a boot image "
            "(settings.images.tpu7x)",
        ],
    ),
    (
        "quota-on-an-api-that-does-not-offer-its-family",
        H + "quotas:\n  - {family: v4, mode: spot, zone: us-central2-b, chips: 8, api: compute}\n",
        [
            "3:66: Compute Engine does not offer TPU v4 (it offers v5p, v6e and tpu7x); v4 is "
            "held through the TPU API: write api: tpu, or leave api out"
        ],
    ),
    (
        "quota-family-that-does-not-exist",
        H + "quotas:\n  - {family: v6, mode: spot, zone: us-east5-b, chips: 8}\n",
        [
            "3:14: family: no TPU generation is called 'v6' (did you mean 'v6e'?); the "
            "generations are v2, v3, v4, v5litepod (v5e, v5lite), v5p, v6e, tpu7x (v7x)"
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_is_one_line_at_its_place_with_the_fix(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


def test_googles_spelling_is_read_and_the_name_sent_is_noted() -> None:
    d = load(
        H + "slots:\n  - {name: a, zone: us-west4-a, accelerator: v5e-8, want: held}\n"
        "generate:\n  - {zones: [us-west4-a], accelerators: {v5e-16: 1}, want: held}\n"
    )
    assert [(s.name, s.accelerator) for s in d.slots] == [
        ("a", "v5litepod-8"),
        ("spot-v5litepod16-usw4a-1", "v5litepod-16"),  # named by the name sent
    ]
    assert [str(n) for n in d.notes] == [
        "desired.yaml:3:46: note: v5e-8 is v5litepod-8: the name the APIs know, which is sent "
        "and shown",
        "desired.yaml:5:42: note: v5e-16 is v5litepod-16: the name the APIs know, which is sent "
        "and shown",
    ]


def test_settings_apis_moves_a_family_and_a_slot_says_otherwise() -> None:
    d = load(
        H + "settings:\n  apis: {v6e: compute}\nslots:\n"
        "  - {name: a, zone: us-east5-b, accelerator: v6e-8, want: held}\n"
        "  - {name: b, zone: us-east5-b, accelerator: v6e-8, api: tpu, want: held}\n"
        "  - {name: c, zone: us-east5-b, accelerator: v5litepod-8, want: held}\n"
    )
    assert [(s.name, s.api) for s in d.slots] == [("a", "compute"), ("b", "tpu"), ("c", "tpu")]


def test_a_race_group_may_mix_both_apis() -> None:
    d = load(
        H + "slots:\n  - {name: a, zone: us-east5-b, accelerator: v6e-8}\n"
        "  - {name: b, zone: europe-west4-a, accelerator: v6e-8, api: compute}\n"
        "race_groups:\n  - {name: g, slots: [a, b]}\n"
    )
    assert [(s.race_group, s.api) for s in d.slots] == [("g", "tpu"), ("g", "compute")]


def test_one_program_across_a_group_needs_slices_of_one_number_of_hosts() -> None:
    assert problems(
        H + "slots:\n  - {name: a, zone: us-east5-b, accelerator: v6e-8}\n"
        "  - {name: b, zone: us-east5-b, accelerator: v6e-8, machine_type: ct6e-standard-4t}\n"
        "race_groups:\n"
        "  - {name: g, count: 2, slots: [a, b], workload: {command: x, across: group}}\n"
    ) == [
        "6:71: across: group needs every candidate of one number of hosts per slice "
        "(a with 1, b with 2)"
    ]


def test_quotas_carry_their_api_and_each_api_has_its_own() -> None:
    d = load(
        H + "quotas:\n  - {family: v6e, mode: spot, zone: us-east5-b, chips: 8}\n"
        "  - {family: v6e, mode: spot, zone: us-east5-b, chips: 64, api: compute}\n"
        "  - {family: tpu7x, mode: spot, region: us-central1, chips: 64}\n"
    )
    assert [(q.family, q.api, q.chips) for q in d.quotas] == [
        ("v6e", "tpu", 8),
        ("v6e", "compute", 64),
        ("tpu7x", "compute", 64),
    ]


def test_unknown_zones_are_let_in_when_asked_from_the_file_or_the_environment() -> None:
    text = slot("us-west9-a, accelerator: v6e-8")
    assert "is not a known zone" in problems(text)[0]
    allowed = text.replace("slots:", "settings: {allow_unknown_zones: true}\nslots:")
    assert load(allowed).slots[0].zone == "us-west9-a"
    env = {"TPU_RECONCILER_ALLOW_UNKNOWN_ZONES": "true"}
    assert load(text, env).slots[0].zone == "us-west9-a"


def test_validate_resolved_shows_what_each_slot_is() -> None:
    d = load(
        slot("us-central1-c, accelerator: tpu7x-128")
        + "  - {name: b, zone: us-east5-b, accelerator: v6e-8, want: held}\n"
    )
    a, b = YAML(typ="safe").load(format_resolved(d))["slots"]
    assert {k: a[k] for k in ("api", "accelerator", "machine_type", "topology", "hosts")} == {
        "api": "compute",
        "accelerator": "tpu7x-128",
        "machine_type": "tpu7x-standard-4t",
        "topology": "4x4x4",
        "hosts": 16,
    }
    assert a["image"] == IMAGE_7X and "runtime_version" not in a
    assert (b["api"], b["topology"], b["runtime_version"]) == ("tpu", "2x4", "v2-alpha-tpuv6e")
    assert "machine_type" not in b and "image" not in b
