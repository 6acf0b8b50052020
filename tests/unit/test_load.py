"""parse_desired: every kind of mistake is reported as FILE:LINE:COL at the line to fix;
environment overrides, generators, defaults and durations resolve as documented."""

from __future__ import annotations

import hashlib
import textwrap

import pytest

from reconciler.errors import InvalidDesiredState
from reconciler.model.desired import Desired
from reconciler.model.load import env_overrides, parse_desired

HEAD = "project: my-project-123\n"
V4 = "    zone: us-central2-b\n    accelerator: v4-8\n"


def load(text: str, env: dict[str, str] | None = None) -> Desired:
    return parse_desired(textwrap.dedent(text), "desired.yaml", env)


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    """Every diagnostic as 'file:line:col: message'."""
    with pytest.raises(InvalidDesiredState) as info:
        load(text, env)
    assert info.value.diagnostics, "an invalid file must say why"
    return [str(d) for d in info.value.diagnostics]


def the_problem(text: str, env: dict[str, str] | None = None) -> str:
    (only,) = problems(text, env)
    return only


# (id, text, "line:col", words the message must contain)
ERRORS = [
    # YAML itself
    ("yaml-unclosed-flow", HEAD + "slots: [\n", "3:1", ["the file ends", "unclosed '['"]),
    ("yaml-tab", HEAD + "\tslots: []\n", "2:1", ["tabs are not allowed", "use spaces"]),
    ("yaml-duplicate-key", HEAD + "project: other-project\n", "2:1", ["duplicate key", "project"]),
    (
        "yaml-bad-indent",
        HEAD + "slots:\n  - name: a\n   zone: x\n",
        "4:4",
        ["indentation does not match", "line 3"],
    ),
    # file shape
    ("not-a-mapping", "- a\n- b\n", "1:1", ["expected a mapping"]),
    ("missing-project", "slots: []\n", "1:1", ["missing", "project"]),
    # unknown keys, with the key the user probably meant
    ("unknown-top", HEAD + "slot: []\n", "2:1", ["unknown key 'slot'", "'slots'"]),
    (
        "unknown-setting",
        HEAD + "settings:\n  poll_intervl: 3\n",
        "3:3",
        ["unknown key 'poll_intervl'", "'poll_interval'"],
    ),
    (
        "unknown-slot-key",
        HEAD + "slots:\n  - name: a\n" + V4 + "    want: held\n    acelerator: v4-8\n",
        "7:5",
        ["unknown key 'acelerator'", "'accelerator'"],
    ),
    (
        "unknown-setup-key",
        HEAD + "defaults:\n  setup:\n    bootstrapp: true\n",
        "4:5",
        ["unknown key 'bootstrapp'", "'bootstrap'"],
    ),
    (
        "unknown-race-key",
        HEAD + "race_groups:\n  - name: g\n    slot: [a]\n",
        "4:5",
        ["unknown key 'slot'", "'slots'"],
    ),
    (
        "unknown-generator-key",
        HEAD + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v4-8: 1}\n"
        "    want: held\n    zone: x\n",
        "6:5",
        ["unknown key 'zone'", "'zones'"],
    ),
    # wrong types and ranges
    (
        "count-not-int",
        HEAD + "race_groups:\n  - name: g\n    count: two\n    slots: [a]\n",
        "4:12",
        ["count must be a whole number", "'two'"],
    ),
    ("concurrency-zero", HEAD + "settings:\n  concurrency: 0\n", "3:16", ["concurrency"]),
    ("slots-mapping", HEAD + "slots: {a: 1}\n", "2:8", ["slots", "list"]),
    (
        "bool-not-bool",
        HEAD + "slots:\n  - name: a\n" + V4 + "    want: held\n    setup: {bootstrap: maybe}\n",
        "7:24",
        ["bootstrap must be true or false", "'maybe'"],
    ),
    (
        "want-typo",
        HEAD + "slots:\n  - name: a\n" + V4 + "    want: keep\n",
        "6:11",
        ["want must be held or released; got 'keep'"],
    ),
    (
        "backend-unknown",
        HEAD + "settings: {backend: grpc}\n",
        "2:21",
        ["backend must be gcloud or rest; got 'grpc'"],
    ),
    (
        "duration-garbage",
        HEAD + "slots:\n  - name: a\n" + V4 + "    want: held\n    valid_until: soon\n",
        "7:18",
        ["duration", "'soon'"],
    ),
    (
        "duration-zero",
        HEAD + "settings:\n  poll_interval: 0\n",
        "3:18",
        ["more than 0"],
    ),
    (
        "generator-count-zero",
        HEAD
        + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v4-8: 0}\n    want: held\n",
        "4:26",
        ["accelerators.v4-8 must be at least 1; got 0"],
    ),
    # names gcloud would reject
    (
        "name-uppercase",
        HEAD + "slots:\n  - name: My-Slot\n" + V4 + "    want: held\n",
        "3:11",
        ["invalid name 'My-Slot'", "lowercase"],
    ),
    (
        "name-underscore",
        HEAD + "slots:\n  - name: my_slot\n" + V4 + "    want: held\n",
        "3:11",
        ["invalid name"],
    ),
    (
        "name-leading-hyphen",
        HEAD + "slots:\n  - name: -rf\n" + V4 + "    want: held\n",
        "3:11",
        ["invalid name '-rf'"],
    ),
    (
        "name-trailing-hyphen",
        HEAD + "slots:\n  - name: slot-\n" + V4 + "    want: held\n",
        "3:11",
        ["invalid name"],
    ),
    (
        "name-too-long",
        HEAD + f"slots:\n  - name: {'a' * 64}\n" + V4 + "    want: held\n",
        "3:11",
        ["at most 63"],
    ),
    (
        "name-shell",
        HEAD + "slots:\n  - name: 'a;reboot'\n" + V4 + "    want: held\n",
        "3:11",
        ["invalid name"],
    ),
    (
        "race-group-name",
        HEAD + "race_groups:\n  - name: Any_V6e\n    slots: [a]\n",
        "3:11",
        ["invalid name 'Any_V6e'"],
    ),
    ("project-invalid", "project: My_Project\n", "1:10", ["invalid project"]),
    (
        "zone-malformed",
        HEAD
        + "slots:\n  - name: a\n    zone: uscentral2b\n    accelerator: v4-8\n    want: held\n",
        "4:11",
        ["invalid zone 'uscentral2b'", "us-central2-b"],
    ),
    (
        "accelerator-no-size",
        HEAD
        + "slots:\n  - name: a\n    zone: us-central2-b\n    accelerator: v4\n    want: held\n",
        "5:18",
        ["invalid accelerator 'v4'", "v4-8"],
    ),
    (
        "accelerator-prefixed",
        HEAD + "slots:\n  - name: a\n    zone: us-central2-b\n    accelerator: tpu-v4-8\n"
        "    want: held\n",
        "5:18",
        ["invalid accelerator"],
    ),
    (
        "generator-zone-malformed",
        HEAD + "generate:\n  - zones: [us-central2-b, eu]\n    accelerators: {v4-8: 1}\n"
        "    want: held\n",
        "3:28",
        ["invalid zone 'eu'"],
    ),
    # rules across the file
    (
        "duplicate-slot",
        HEAD
        + "slots:\n  - name: a\n"
        + V4
        + "    want: held\n  - name: a\n"
        + V4
        + "    want: released\n",
        "7:11",
        ["duplicate slot name 'a'", "line 3"],
    ),
    (
        "duplicate-after-generation",
        HEAD + "slots:\n  - name: spot-v6e8-ew4a-1\n    zone: europe-west4-a\n"
        "    accelerator: v6e-8\n    want: held\n"
        "generate:\n  - zones: [europe-west4-a]\n    accelerators: {v6e-8: 2}\n    want: held\n",
        "8:5",
        ["duplicate slot name 'spot-v6e8-ew4a-1'", "line 3"],
    ),
    (
        "race-unknown-slot",
        HEAD + "slots:\n  - name: cand-a\n" + V4 + "race_groups:\n  - name: g\n"
        "    slots: [cand-a, cand-b]\n",
        "8:21",
        ["unknown slot 'cand-b'", "did you mean 'cand-a'"],
    ),
    (
        "race-member-with-want",
        HEAD + "slots:\n  - name: a\n" + V4 + "    want: held\n"
        "race_groups:\n  - name: g\n    slots: [a]\n",
        "6:5",
        ["races in group 'g'", "remove 'want'"],
    ),
    (
        "slot-in-two-groups",
        HEAD + "slots:\n  - name: a\n" + V4 + "race_groups:\n  - name: g\n    slots: [a]\n"
        "  - name: h\n    slots:\n      - a\n",
        "11:9",
        ["already in race group 'g'"],
    ),
    (
        "slot-twice-in-group",
        HEAD + "slots:\n  - name: a\n" + V4 + "race_groups:\n  - name: g\n    slots: [a, a]\n",
        "8:16",
        ["listed twice"],
    ),
    (
        "duplicate-group",
        HEAD
        + "slots:\n  - name: a\n"
        + V4
        + "  - name: b\n"
        + V4
        + "race_groups:\n  - name: g\n    slots: [a]\n  - name: g\n    slots: [b]\n",
        "12:11",
        ["duplicate race group name 'g'"],
    ),
    (
        "count-over-candidates",
        HEAD + "slots:\n  - name: a\n" + V4 + "race_groups:\n  - name: g\n    count: 2\n"
        "    slots: [a]\n",
        "8:12",
        ["count 2", "1 candidates"],
    ),
    (
        "slot-without-want",
        HEAD + "slots:\n  - name: a\n" + V4,
        "3:11",
        ["needs 'want: held' or 'want: released'"],
    ),
    (
        "generator-without-want",
        HEAD + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v4-8: 1}\n",
        "3:5",
        ["'spot-v48-usc2b-1' needs a 'want'"],
    ),
    (
        "unknown-family",
        HEAD + "slots:\n  - name: a\n    zone: us-central2-b\n    accelerator: v9x-8\n"
        "    want: held\n",
        "5:18",
        ["unknown accelerator 'v9x-8'", "no TPU generation is called 'v9x'"],
    ),
    (
        "unknown-family-generated",
        HEAD + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v9x-8: 1}\n"
        "    want: held\n",
        "4:20",
        ["unknown accelerator 'v9x-8'"],
    ),
]


@pytest.mark.parametrize(
    ("text", "where", "words"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_each_mistake_is_reported_where_it_is(text: str, where: str, words: list[str]) -> None:
    found = problems(text)
    hits = [p for p in found if p.startswith(f"desired.yaml:{where}: ")]
    assert hits, f"expected a problem at {where}, got {found}"
    for word in words:
        assert any(word in h for h in hits), (word, hits)


def test_every_problem_is_reported_at_once_in_line_order() -> None:
    found = problems(
        HEAD + "slots:\n  - name: Bad_Name\n    zone: nowhere\n    accelerator: v4-8\n"
        "    want: held\n  - name: ok\n    zone: us-central2-b\n    accelerator: nope\n"
        "    want: held\n"
    )
    assert [f.split(": ")[0] for f in found] == [
        "desired.yaml:3:11",
        "desired.yaml:4:11",
        "desired.yaml:9:18",
    ]


def test_diagnostics_name_the_file_they_came_from() -> None:
    with pytest.raises(InvalidDesiredState) as info:
        parse_desired("project: x\n", "/home/me/tpus/desired.yaml")
    assert str(info.value).startswith("/home/me/tpus/desired.yaml:1:10: ")


def test_runtime_for_a_family_can_come_from_settings_under_its_alias() -> None:
    d = load(
        HEAD + "settings:\n  runtime_versions: {v5e: my-runtime}\n"
        "slots:\n  - name: a\n    zone: us-west4-a\n    accelerator: v5litepod-8\n"
        "    want: held\n"
    )
    assert d.slots[0].runtime_version == "my-runtime"
    assert d.settings.runtime_versions == {"v5litepod": "my-runtime"}


def test_an_empty_or_nul_file_is_refused() -> None:
    assert "empty" in the_problem("")
    assert "NUL" in the_problem("project: a\x00b\n")


# --- environment overrides ---------------------------------------------------------------------


def test_env_overrides_settings_and_wins_over_the_file() -> None:
    d = load(
        HEAD + "settings:\n  poll_interval: 1m\n  backend: gcloud\n",
        {
            "TPU_RECONCILER_POLL_INTERVAL": "10",
            "TPU_RECONCILER_FAST_POLL_INTERVAL": "2s",
            "TPU_RECONCILER_BACKEND": "rest",
            "TPU_RECONCILER_PRUNE": "true",
            "TPU_RECONCILER_CONCURRENCY": "4",
            "TPU_RECONCILER_NTFY_TOPIC": "my-long-random-topic",
        },
    )
    s = d.settings
    assert (s.poll_interval, s.fast_poll_interval, s.backend) == (10.0, 2.0, "rest")
    assert (s.prune, s.concurrency, s.ntfy_topic) == (True, 4, "my-long-random-topic")


def test_env_overrides_the_project() -> None:
    assert load(HEAD, {"TPU_RECONCILER_PROJECT": "other-project-9"}).project == "other-project-9"


def test_a_bad_env_value_is_reported_against_the_variable() -> None:
    assert problems(HEAD, {"TPU_RECONCILER_POLL_INTERVAL": "soon"}) == [
        "$TPU_RECONCILER_POLL_INTERVAL:1:1: poll_interval: expected a duration like 30, "
        "'30s', '2m' or '6h', got 'soon'"
    ]


def test_only_scalar_settings_are_read_from_the_environment() -> None:
    env = {
        "TPU_RECONCILER_POLL_INTERVAL": "5",
        "TPU_RECONCILER_SUBNETS": "x",
        "TPU_RECONCILER_SETUP_SCRIPTS": "x",
        "TPU_RECONCILER_NOT_A_SETTING": "x",
        "POLL_INTERVAL": "9",
    }
    assert env_overrides(env) == {"poll_interval": "5"}


def test_without_env_the_file_decides() -> None:
    assert load(HEAD + "settings:\n  poll_interval: 1m\n", {}).settings.poll_interval == 60.0


# --- generators, defaults, durations ---------------------------------------------------------


def test_generator_expands_zones_times_counts_with_the_naming_convention() -> None:
    d = load(
        HEAD + "generate:\n  - zones: [europe-west4-a, us-east1-d]\n"
        "    accelerators: {v6e-8: 2, v6e-64: 1}\n    want: held\n"
    )
    assert [(s.name, s.zone, s.accelerator) for s in d.slots] == [
        ("spot-v6e8-ew4a-1", "europe-west4-a", "v6e-8"),
        ("spot-v6e8-ew4a-2", "europe-west4-a", "v6e-8"),
        ("spot-v6e64-ew4a-1", "europe-west4-a", "v6e-64"),
        ("spot-v6e8-use1d-1", "us-east1-d", "v6e-8"),
        ("spot-v6e8-use1d-2", "us-east1-d", "v6e-8"),
        ("spot-v6e64-use1d-1", "us-east1-d", "v6e-64"),
    ]
    assert all(s.generated and s.want == "held" and s.mode == "spot" for s in d.slots)


@pytest.mark.parametrize(
    ("mode", "prefix"), [("spot", "spot"), ("on-demand", "od"), ("reserved", "res")]
)
def test_generated_names_carry_the_mode(mode: str, prefix: str) -> None:
    d = load(
        HEAD + f"generate:\n  - mode: {mode}\n    zones: [us-central2-b]\n"
        "    accelerators: {v4-8: 1}\n    want: released\n"
    )
    assert [(s.name, s.mode) for s in d.slots] == [(f"{prefix}-v48-usc2b-1", mode)]


def test_generated_names_use_configured_zone_codes() -> None:
    d = load(
        HEAD + "settings:\n  zone_codes: {europe-west4-a: nl}\n"
        "generate:\n  - zones: [europe-west4-a]\n    accelerators: {v6e-8: 1}\n    want: held\n"
    )
    assert d.slots[0].name == "spot-v6e8-nl-1"
    assert d.zone_code("europe-west4-a") == "nl"


def test_generated_slots_can_race_and_then_carry_no_want() -> None:
    d = load(
        HEAD + "generate:\n  - zones: [europe-west4-a, us-east1-d]\n"
        "    accelerators: {v6e-8: 1}\n"
        "race_groups:\n  - name: any-v6e\n    slots: [spot-v6e8-ew4a-1, spot-v6e8-use1d-1]\n"
    )
    assert [(s.race_group, s.want) for s in d.slots] == [("any-v6e", None), ("any-v6e", None)]


def test_explicit_slots_come_first_and_order_follows_the_file() -> None:
    d = load(
        HEAD + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v4-8: 1}\n"
        "    want: held\nslots:\n  - name: z\n" + V4 + "    want: held\n"
    )
    assert [(s.name, s.order) for s in d.slots] == [("z", 0), ("spot-v48-usc2b-1", 1)]


def test_defaults_and_layers_of_setup() -> None:
    d = load(
        HEAD + "settings:\n  setup_scripts: [a.sh]\n"
        "defaults:\n  mode: on-demand\n  setup: {bootstrap: true, generation: 2}\n"
        "slots:\n  - name: a\n" + V4 + "    want: held\n"
        "  - name: b\n" + V4 + "    want: held\n    mode: spot\n"
        "    setup: {tmux: false, tailscale: true, generation: 1, scripts: [b.sh]}\n"
    )
    a, b = d.slots
    assert (a.mode, b.mode) == ("on-demand", "spot")
    assert (a.setup.bootstrap, a.setup.tailscale, a.setup.tmux) == (True, False, True)
    assert (a.setup.generation, a.setup.scripts) == (2, ("a.sh",))
    assert (b.setup.bootstrap, b.setup.tailscale, b.setup.tmux) == (True, True, False)
    assert (b.setup.generation, b.setup.scripts) == (3, ("b.sh",))


def test_slot_defaults_without_any_settings() -> None:
    d = load(HEAD + "slots:\n  - name: a\n" + V4 + "    want: held\n")
    (a,) = d.slots
    assert (a.mode, a.runtime_version, a.valid_until_seconds) == (
        "spot",
        "tpu-ubuntu2204-base",
        None,
    )
    assert (a.setup.bootstrap, a.setup.tailscale, a.setup.tmux) == (False, False, True)


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("30", 30),
        ("'30'", 30),
        ("30s", 30),
        ("2m", 120),
        ("6h", 21600),
        ("1d", 86400),
        ("1.5h", 5400),
    ],
)
def test_durations_in_the_file(written: str, seconds: int) -> None:
    d = load(
        HEAD + f"settings:\n  poll_interval: {written}\n"
        f"slots:\n  - name: a\n" + V4 + f"    want: held\n    valid_until: {written}\n"
    )
    assert d.settings.poll_interval == seconds
    assert d.slots[0].valid_until_seconds == seconds


def test_digest_identifies_the_text() -> None:
    text = HEAD + "slots:\n  - name: a\n" + V4 + "    want: held\n"
    d = parse_desired(text)
    assert d.digest == hashlib.sha256(text.encode()).hexdigest()
    assert parse_desired(text + "# a comment\n").digest != d.digest
