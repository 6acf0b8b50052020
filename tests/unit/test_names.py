"""Names that reach gcloud, SSH and tmux: what gcloud accepts passes, nothing that could be
read as an option or a shell/tmux/path metacharacter ever does; zone codes and generated names
follow the documented convention."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.errors import UnsafeName
from reconciler.model import names

GOOD_NAMES = ["a", "spot-v6e8-ew4a-1", "od-v4-8-usc2b-1", "x" * 63, "a1", "a-b-c"]
BAD_NAMES = [
    "",
    "A",
    "1abc",
    "-rf",
    "abc-",
    "a_b",
    "a.b",
    "a b",
    "a;b",
    "a:b",
    "a/b",
    "x" * 64,
    "ä",
    "a\n",
]


@pytest.mark.parametrize("value", GOOD_NAMES)
def test_names_gcloud_accepts_pass(value: str) -> None:
    assert names.check_name(value) == value


@pytest.mark.parametrize("value", [*BAD_NAMES, None, 5, ["a"]])
def test_names_gcloud_rejects_are_refused_with_the_rule(value: object) -> None:
    with pytest.raises(UnsafeName, match="lowercase letters, digits and hyphens"):
        names.check_name(value)


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (
            names.check_zone,
            ["us-central2-b", "europe-west4-a", "northamerica-northeast1-a"],
            ["us-central2", "uscentral2b", "US-CENTRAL2-B", "us-central2-b;x", "-us-central2-b"],
        ),
        (
            names.check_accelerator,
            ["v4-8", "v5litepod-16", "v5p-128", "v6e-64", "v2-8"],
            ["v4", "tpu-v4-8", "v4-0", "v4-08", "V4-8", "v4-8 ", "v4--8"],
        ),
        (
            names.check_project,
            ["my-project-123", "example.com:my-project"],
            ["abc", "My-Project", "-project-1", "project_1234", "p" * 31],
        ),
        (
            names.check_runtime_version,
            ["tpu-ubuntu2204-base", "tpu-vm-tf-2.16.1-pjrt"],
            ["-base", "a b", "base;rm", "", "A"],
        ),
        (
            names.check_network,
            ["default", "projects/p/global/networks/n", "sub_1"],
            ["-net", "net work", "net;x", ""],
        ),
        (
            names.check_user,
            ["alice", "alice_example_com", "_svc"],
            ["-alice", "Alice", "al ice", "a;b", ""],
        ),
        (names.check_zone_code, ["usc2b", "nl", "a" * 16], ["", "us-c", "A", "a" * 17]),
    ],
    ids=["zone", "accelerator", "project", "runtime", "network", "user", "zone-code"],
)
def test_each_kind_of_name(check: Callable[[object], str], good: list[str], bad: list[str]) -> None:
    for value in good:
        assert check(value) == value
    for value in bad:
        with pytest.raises(UnsafeName):
            check(value)


_CHECKS = [
    names.check_name,
    names.check_zone,
    names.check_accelerator,
    names.check_runtime_version,
    names.check_network,
    names.check_user,
    names.check_zone_code,
    names.check_project,
]
_UNSAFE = re.compile(r"[\s;&|$`'\"\\<>(){}\[\]*?!~#%^=,@+]")


@given(st.sampled_from(_CHECKS), st.text(max_size=80))
def test_nothing_unsafe_ever_passes(check: Callable[[object], str], value: str) -> None:
    """Whatever text a user writes, a name that passes cannot be an option or a metacharacter."""
    try:
        out = check(value)
    except UnsafeName:
        return
    assert out == value
    assert not out.startswith(("-", ".")) and out.isascii()
    assert not _UNSAFE.search(out), out


@given(st.from_regex(names.NAME_RE, fullmatch=True))
def test_every_rfc1035_label_is_a_valid_name(value: str) -> None:
    assert names.check_name(value) == value


@pytest.mark.parametrize(
    ("zone", "code"),
    [
        ("us-central2-b", "usc2b"),
        ("europe-west4-a", "ew4a"),
        ("us-east1-d", "use1d"),
        ("us-east5-b", "use5b"),
        ("asia-northeast1-b", "an1b"),
        ("me-central1-a", "mec1a"),
        ("northamerica-northeast1-a", "nn1a"),
    ],
)
def test_zone_codes(zone: str, code: str) -> None:
    assert names.zone_code(zone) == code


def test_zone_code_refuses_a_bad_zone() -> None:
    with pytest.raises(UnsafeName):
        names.zone_code("not-a-zone")


@pytest.mark.parametrize(
    ("mode", "accelerator", "code", "index", "name"),
    [
        ("spot", "v6e-8", "ew4a", 1, "spot-v6e8-ew4a-1"),
        ("spot", "v6e-64", "ew4a", 12, "spot-v6e64-ew4a-12"),
        ("on-demand", "v4-8", "usc2b", 1, "od-v48-usc2b-1"),
        ("reserved", "v5p-128", "use5a", 3, "res-v5p128-use5a-3"),
    ],
)
def test_generated_slot_names(
    mode: str, accelerator: str, code: str, index: int, name: str
) -> None:
    assert names.slot_name(mode, accelerator, code, index) == name


@pytest.mark.parametrize(
    ("accelerator", "family", "size", "workers"),
    [
        ("v2-8", "v2", 8, 1),
        ("v3-32", "v3", 32, 4),
        ("v4-8", "v4", 8, 1),
        ("v4-32", "v4", 32, 4),
        ("v5p-8", "v5p", 8, 1),
        ("v5litepod-4", "v5litepod", 4, 1),
        ("v5litepod-16", "v5litepod", 16, 4),
        ("v6e-8", "v6e", 8, 1),
        ("v6e-64", "v6e", 64, 16),
    ],
)
def test_accelerator_parts_and_worker_count(
    accelerator: str, family: str, size: int, workers: int
) -> None:
    assert names.accelerator_family(accelerator) == family
    assert names.accelerator_size(accelerator) == size
    assert names.worker_count(accelerator) == workers


def test_host_key_alias_is_per_instance_and_worker() -> None:
    first = names.host_key_alias("spot-v6e8-ew4a-1@1234567", 0)
    assert first == "tpu.spot-v6e8-ew4a-1.1234567.w0"
    assert names.host_key_alias("spot-v6e8-ew4a-1@1234567", 1) != first
    assert names.host_key_alias("spot-v6e8-ew4a-1@7654321", 0) != first, "re-created node"
    assert names.host_key_alias("spot-v6e8-ew4a-1@1234567", 0) == first


def test_host_key_alias_refuses_an_unsafe_node_name() -> None:
    with pytest.raises(UnsafeName):
        names.host_key_alias("-oProxyCommand=x@1", 0)


@pytest.mark.parametrize(
    "labels",
    [{"Managed-By": "x"}, {"1key": "v"}, {"k": "Has Space"}, {"k": "a" * 64}, {"k": "--x;rm"}],
)
def test_labels_gcp_would_refuse_never_reach_a_backend(labels: dict[str, str]) -> None:
    with pytest.raises(UnsafeName):
        names.check_labels(labels)


def test_our_own_label_is_valid() -> None:
    assert names.check_labels({"managed-by": "tpu-reconciler"}) == {"managed-by": "tpu-reconciler"}


@pytest.mark.parametrize("path", ["", "/", "-ns/", "ns", "ns/key/extra", "ns/$(id)"])
def test_bad_guest_attribute_query_paths_are_refused(path: str) -> None:
    with pytest.raises(UnsafeName):
        names.check_query_path(path)


@pytest.mark.parametrize("path", ["guestInventory/", "guestInventory/ShortName"])
def test_good_guest_attribute_query_paths_pass(path: str) -> None:
    assert names.check_query_path(path) == path
