"""The loader's words, exactly: input YAML -> every ``file:line:col: message`` line, in one
pass, ordered by position, root causes instead of the problems that follow from them, and
never the YAML library's or pydantic's jargon."""

from __future__ import annotations

import typing

import pytest

from reconciler.errors import InvalidDesiredState
from reconciler.model import desired_schema as d
from reconciler.model.load import parse_desired

H = "project: my-project-123\n"
A = "  - name: a\n    zone: us-central2-b\n    accelerator: v4-8\n"

#: The race group of the README with the second member mistyped (-2 for -1).
RACE_TYPO = H + (
    "slots:\n"
    "  - {name: spot-v6e8-ew4a-1, zone: europe-west4-a, accelerator: v6e-8}\n"
    "  - {name: spot-v6e8-use1d-1, zone: us-east1-d, accelerator: v6e-8}\n"
    "race_groups:\n"
    "  - name: any-v6e-8\n"
    "    count: 1\n"
    "    slots: [spot-v6e8-ew4a-1, spot-v6e8-use1d-2]\n"
)

# (id, text, every problem as it is printed)
CASES: list[tuple[str, str, list[str]]] = [
    # --- YAML syntax ---------------------------------------------------------------------
    (
        "tab-indent",
        H + "slots:\n  - name: a\n\tzone: us-central2-b\n",
        ["4:1: tabs are not allowed for indentation in YAML; use spaces"],
    ),
    (
        "tab-after-colon",
        H + "settings:\n  backend:\trest\n",
        ["3:11: a tab is not allowed here in YAML; use spaces"],
    ),
    (
        "duplicate-key",
        H + "project: other-project\n",
        ["2:1: duplicate key 'project': a key may appear only once in a mapping"],
    ),
    (
        "stray-colon",
        H + "settings:\n  ntfy_topic: a: b\n",
        [
            "3:16: unexpected ':' here: quote a value that contains ': ', and check that the "
            "line above has its ':'"
        ],
    ),
    (
        "unclosed-quote",
        H + "settings:\n  ntfy_topic: 'abc\n",
        ["3:15: a quoted value that starts at line 3 is never closed"],
    ),
    (
        "unclosed-bracket",
        H + "slots: [a, b\nrace_groups: []\n",
        ["3:12: expected ',' or ']' to continue the '[' opened at line 2"],
    ),
    (
        "bad-indent",
        H + "settings:\n  prune: true\n backend: rest\n",
        [
            "4:2: this line's indentation does not match the lines above "
            "(the block starts at line 1)"
        ],
    ),
    (
        "undefined-alias",
        H + "settings: *base\n",
        ["2:11: '*base' refers to no anchor: define '&base' before using it"],
    ),
    # --- every enum (Literal) of the schema, with its choices and a did-you-mean -----------
    (
        "slot-mode",
        H + "slots:\n" + A + "    mode: ondemand\n    want: held\n",
        [
            "6:11: mode must be one of spot, on-demand, reserved or flex-start; got 'ondemand' "
            "(did you mean 'on-demand'?)"
        ],
    ),
    (
        "defaults-mode",
        H + "defaults:\n  mode: Spot\n",
        [
            "3:9: mode must be one of spot, on-demand, reserved or flex-start; got 'Spot' "
            "(did you mean 'spot'?)"
        ],
    ),
    (
        "generator-mode",
        H + "generate:\n  - mode: preemptible\n    zones: [us-central2-b]\n"
        "    accelerators: {v4-8: 1}\n    want: held\n",
        ["3:11: mode must be one of spot, on-demand, reserved or flex-start; got 'preemptible'"],
    ),
    (
        "want",
        H + "slots:\n" + A + "    want: hold\n",
        ["6:11: want must be held or released; got 'hold' (did you mean 'held'?)"],
    ),
    (
        "want-bool",
        H + "slots:\n" + A + "    want: true\n",
        ["6:11: want must be held or released; got true"],
    ),
    (
        "backend",
        H + "settings:\n  backend: grpc\n",
        ["3:12: backend must be gcloud or rest; got 'grpc'"],
    ),
    (
        "credentials",
        H + "settings:\n  credentials: ADC\n",
        ["3:16: credentials must be gcloud or adc; got 'ADC' (did you mean 'adc'?)"],
    ),
    (
        "restart",
        H + "defaults:\n  workload:\n    restart: on_failure\n",
        [
            "4:14: restart must be one of never, on-preemption, on-failure or always; "
            "got 'on_failure' (did you mean 'on-failure'?)"
        ],
    ),
    (
        "when-done",
        H + "defaults:\n  workload:\n    when_done: keeep\n",
        ["4:16: when_done must be keep or release; got 'keeep' (did you mean 'keep'?)"],
    ),
    # --- keys ----------------------------------------------------------------------------
    (
        "mistyped-required-key",
        H
        + "slots:\n  - name: a\n    zonee: us-central2-b\n    accelerator: v4-8\n    want: held\n",
        ["4:5: unknown key 'zonee' (did you mean 'zone', which is required?)"],
    ),
    (
        "mistyped-required-generator-key",
        H + "generate:\n  - zone: [us-central2-b]\n    accelerators: {v4-8: 1}\n    want: held\n",
        ["3:5: unknown key 'zone' (did you mean 'zones', which is required?)"],
    ),
    (
        "mistyped-optional-key",
        H + "slots:\n" + A + "    want: held\n    valid_untl: 6h\n",
        ["7:5: unknown key 'valid_untl' (did you mean 'valid_until'?)"],
    ),
    (
        # not also "slot 'a' needs 'want: held'": that follows from the typo
        "mistyped-want",
        H + "slots:\n" + A + "    wnat: held\n",
        ["6:5: unknown key 'wnat' (did you mean 'want'?)"],
    ),
    (
        # the slots are under a mistyped key: the race group's "unknown slot" follows from it
        "mistyped-top-level-key",
        H + "slot:\n" + A + "    want: held\nrace_groups:\n  - {name: g, slots: [a]}\n",
        ["2:1: unknown key 'slot' (did you mean 'slots'?)"],
    ),
    ("missing-project", "slots: []\n", ["1:1: missing required key 'project'"]),
    # --- types and ranges ------------------------------------------------------------------
    (
        "types",
        H + "settings:\n  concurrency: many\n  prune: maybe\n  ssh_port: 70000\n"
        "  setup_scripts: run.sh\n  subnets: [a]\n",
        [
            "3:16: concurrency must be a whole number; got 'many'",
            "4:10: prune must be true or false; got 'maybe'",
            "5:13: ssh_port must be at most 65535; got 70000",
            "6:18: setup_scripts must be a list; got 'run.sh'",
            "7:12: subnets must be a mapping of keys to values; got a list",
        ],
    ),
    (
        "number-for-text",
        "project: 123456789\n",
        ["1:10: project must be a string; got 123456789 (put it in quotes)"],
    ),
    (
        "url",
        H + "settings:\n  ntfy_server: ntfy.sh\n",
        ["3:16: ntfy_server: expected an http:// or https:// URL"],
    ),
    ("empty-value", H + "slots:\n", ["2:1: slots must be a list; got nothing (an empty value)"]),
    (
        "range",
        H + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v4-8: 0}\n    want: held\n",
        ["4:26: accelerators.v4-8 must be at least 1; got 0"],
    ),
    (
        "too-short",
        H + "race_groups:\n  - {name: g, slots: []}\n",
        ["3:22: slots needs at least 1 entry"],
    ),
    # --- root causes ----------------------------------------------------------------------
    (
        # the mistyped member is the cause; "needs 'want: held'" on the slot it meant is not
        # said (its obvious fix would hold an extra TPU)
        "race-member-typo",
        RACE_TYPO,
        [
            "8:31: unknown slot 'spot-v6e8-use1d-2' (did you mean 'spot-v6e8-use1d-1'? that "
            "slot is in no race group and has no 'want')"
        ],
    ),
    (
        # the slot it looks like is held: only the did-you-mean
        "race-member-typo-held",
        RACE_TYPO.replace("accelerator: v6e-8}\nrace", "accelerator: v6e-8, want: held}\nrace"),
        ["8:31: unknown slot 'spot-v6e8-use1d-2' (did you mean 'spot-v6e8-use1d-1'?)"],
    ),
    (
        # schema errors do not hide the rules across the file: one pass, in line order
        "schema-and-rules-together",
        H + "settings:\n  poll_interval: soon\nslots:\n"
        "  - {name: a, zone: us-central2-b, accelerator: v4-8, mode: ondemand}\n"
        "  - {name: b, zone: us-central2-b, accelerator: v4-8}\n"
        "race_groups:\n  - {name: g, slots: [a, c]}\n",
        [
            "3:18: poll_interval: expected a duration like 30, '30s', '2m' or '6h', got 'soon'",
            "5:61: mode must be one of spot, on-demand, reserved or flex-start; got 'ondemand' "
            "(did you mean 'on-demand'?)",
            "6:12: slot 'b' needs 'want: held' or 'want: released' (or membership in a race group)",
            "8:26: unknown slot 'c'",
        ],
    ),
    (
        # a slot the schema refused is still a slot its race group may name
        "refused-slot-is-still-known",
        H + "slots:\n"
        "  - {name: cand-a, zone: us-central2-b, accelerator: v4-8, setup: {bootstrap: maybe}}\n"
        "  - {name: cand-b, zone: us-central2-b, accelerator: v4-8}\n"
        "race_groups:\n  - {name: g, slots: [cand-a, cand-b]}\n",
        ["3:79: bootstrap must be true or false; got 'maybe'"],
    ),
    (
        # a race group the schema refused still has members: they need no want
        "refused-group-still-has-members",
        H + "slots:\n" + A + "race_groups:\n  - {name: g, count: two, slots: [a]}\n",
        ["7:22: count must be a whole number; got 'two'"],
    ),
    (
        "duplicate-slot-after-a-schema-error",
        H + "settings: {prune: maybe}\nslots:\n" + A + "    want: held\n" + A + "    want: held\n",
        [
            "2:19: prune must be true or false; got 'maybe'",
            "8:11: duplicate slot name 'a' (first defined at line 4)",
        ],
    ),
    # --- times: each at its own line, beside the file's other problems -------------------
    (
        "impossible-times",
        H
        + "settings: {prune: maybe}\nslots:\n"
        + A
        + "    hold_until: 2026-13-01T00:00:00Z\n"
        + A.replace("name: a", "name: b")
        + "    start_at: 2026-02-30T00:00:00Z\n"
        + A.replace("name: a", "name: c")
        + "    hold_until: 2026-12-01T00:00:60Z\n"
        + A.replace("name: a", "name: d")
        + "    hold_until: 2026-12-01T00:00:00+99:00\n",
        [
            "2:19: prune must be true or false; got 'maybe'",
            "7:17: hold_until: 2026-13-01T00:00:00Z is not a valid time (month must be in "
            "1..12): write e.g. 2026-12-24T20:00:00+01:00 or 2026-12-24T19:00:00Z",
            "11:15: start_at: 2026-02-30T00:00:00Z is not a valid time (day is out of range "
            "for month): write e.g. 2026-12-24T20:00:00+01:00 or 2026-12-24T19:00:00Z",
            "15:17: hold_until: 2026-12-01T00:00:60Z is not a valid time (second must be in "
            "0..59): write e.g. 2026-12-24T20:00:00+01:00 or 2026-12-24T19:00:00Z",
            "19:17: hold_until: 2026-12-01T00:00:00+99:00 is not a valid time (a UTC offset "
            "must be less than 24 hours): write e.g. 2026-12-24T20:00:00+01:00 or "
            "2026-12-24T19:00:00Z",
        ],
    ),
    (
        "times-the-controller-cannot-compute-with",
        H
        + "slots:\n"
        + A
        + "    hold_until: 9999-12-31T23:59:59-08:00\n"
        + A.replace("name: a", "name: b")
        + "    start_at: 0001-01-01T00:00:00+14:00\n",
        [
            "6:17: hold_until: 9999-12-31T23:59:59-08:00 is outside the years the controller "
            "can work with (1970 to 9998)",
            "10:15: start_at: 0001-01-01T00:00:00+14:00 is outside the years the controller "
            "can work with (1970 to 9998)",
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_problem_in_the_projects_words(text: str, expected: list[str]) -> None:
    with pytest.raises(InvalidDesiredState) as info:
        parse_desired(text, "desired.yaml")
    assert [str(x) for x in info.value.diagnostics] == [f"desired.yaml:{e}" for e in expected]


def test_no_message_speaks_the_libraries_jargon() -> None:
    jargon = ("Input should be", "cannot start any token", "<block end>", "model_type", "[key]")
    for _, text, _ in CASES:
        with pytest.raises(InvalidDesiredState) as info:
            parse_desired(text, "desired.yaml")
        for diag in info.value.diagnostics:
            assert not any(j in diag.message for j in jargon), diag


@pytest.mark.parametrize(
    ("where", "literal"),
    [
        ("defaults:\n  mode: {}\n", d.Mode),
        ("slots:\n" + A + "    want: {}\n", d.Want),
        ("settings:\n  backend: {}\n", d.Backend),
        ("settings:\n  credentials: {}\n", d.CredentialSource),
        ("defaults:\n  workload:\n    restart: {}\n", d.Restart),
        ("defaults:\n  workload:\n    when_done: {}\n", d.WhenDone),
    ],
)
def test_every_enum_lists_its_values_and_suggests_the_near_one(where: str, literal: object) -> None:
    choices = typing.get_args(literal)
    for choice in choices:
        typo = choice[:-1] + "x" + choice[-1]  # one letter too many
        with pytest.raises(InvalidDesiredState) as info:
            parse_desired(H + where.replace("{}", typo), "desired.yaml")
        (diag,) = info.value.diagnostics
        assert all(c in diag.message for c in choices), diag
        assert f"got {typo!r} (did you mean {choice!r}?)" in diag.message, diag
