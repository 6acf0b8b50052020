"""``setup.at_boot`` and ``workload.before_end`` in desired.yaml: what they resolve to, and
every mistake at the line to fix (FILE:LINE:COL)."""

from __future__ import annotations

import pytest

from reconciler.errors import InvalidDesiredState
from reconciler.model.desired import Desired
from reconciler.model.ends import BeforeEndSpec
from reconciler.model.load import parse_desired

HEAD = "project: my-project-123\nsettings:\n  setup_scripts: [setup.sh]\n"
SLOT = "  - name: a\n    zone: us-central2-b\n    accelerator: v4-32\n    want: held\n"


def load(text: str) -> Desired:
    return parse_desired(text, "desired.yaml", {})


def problems(text: str) -> list[str]:
    with pytest.raises(InvalidDesiredState) as info:
        load(text)
    return [str(d) for d in info.value.diagnostics]


def test_at_boot_turns_bootstrap_on_and_inherits() -> None:
    d = load(HEAD + "defaults:\n  setup: {at_boot: true}\nslots:\n" + SLOT)
    spec = d.slot("a")
    assert spec is not None
    assert (spec.setup.at_boot, spec.setup.bootstrap, spec.setup.scripts) == (
        True,
        True,
        ("setup.sh",),
    )
    off = load(HEAD + "defaults:\n  setup: {at_boot: true}\nslots:\n" + SLOT +
               "    setup: {at_boot: false}\n")  # fmt: skip
    assert off.slot("a").setup.at_boot is False  # type: ignore[union-attr]


def test_before_end_resolves_with_its_defaults() -> None:
    d = load(HEAD + "slots:\n" + SLOT + "    workload:\n      command: python3 train.py\n"
             "      before_end: {command: [kill, -USR1, x]}\n")  # fmt: skip
    w = d.slot("a").workload  # type: ignore[union-attr]
    assert w is not None and w.before_end == BeforeEndSpec(("kill", "-USR1", "x"), 600.0, 600.0)
    d = load(HEAD + "slots:\n" + SLOT + "    workload:\n      command: python3 train.py\n"
             "      before_end: {command: ckpt, lead: 30m, timeout: 5m}\n")  # fmt: skip
    w = d.slot("a").workload  # type: ignore[union-attr]
    assert w is not None and w.before_end == BeforeEndSpec("ckpt", 1800.0, 300.0)
    # not part of what runs: changing it does not restart the program
    assert w.identity == d.slot("a").workload.identity  # type: ignore[union-attr]


def test_a_before_end_change_is_not_a_new_run() -> None:
    base = HEAD + "slots:\n" + SLOT + "    workload:\n      command: python3 train.py\n"
    plain = load(base).slot("a").workload  # type: ignore[union-attr]
    more = load(base + "      before_end: {command: ckpt}\n").slot("a").workload  # type: ignore[union-attr]
    assert plain is not None and more is not None
    assert (plain.identity, plain.policy) == (more.identity, more.policy)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "slots:\n" + SLOT + "    setup: {at_boot: true, telemetry: true}\n",
            "desired.yaml:9:22: at_boot runs the scripts as root at boot, and setup.telemetry "
            "installs its client over SSH in the SSH user's home: turn one of them off",
        ),
        (
            "slots:\n" + SLOT + "    setup: {at_boot: true, bootstrap: false}\n",
            "desired.yaml:9:22: at_boot runs the setup scripts at boot: it cannot go with "
            "bootstrap: false",
        ),
        (
            "slots:\n" + SLOT + "    setup: {at_boot: true, scripts: []}\n",
            "desired.yaml:9:22: at_boot needs setup scripts (setup.scripts or "
            "settings.setup_scripts)",
        ),
        (
            "slots:\n" + SLOT + "    mode: flex-start\n    max_run_duration: 1h\n"
            "    workload:\n      command: x\n      before_end: {command: y, lead: 2h}\n",
            "desired.yaml:13:38: lead 2h is not shorter than the run (max_run_duration 1h): "
            "it would run before the start",
        ),
        (
            "slots:\n" + SLOT + "    hold_for: 30m\n"
            "    workload:\n      command: x\n      before_end: {command: y, lead: 30m}\n",
            "desired.yaml:12:38: lead 30m is not shorter than hold_for 30m: it would run "
            "before the node is held",
        ),
        (
            "slots:\n" + SLOT + "    workload: {before_end: {command: y}}\n",
            "desired.yaml:9:15: before_end runs before a workload's end, and this workload "
            "has no command (give one here or in an outer block)",
        ),
        (
            "defaults:\n  workload: {before_end: {command: y}}\nslots:\n" + SLOT,
            "desired.yaml:5:26: before_end runs before a workload's end, but no slot runs a "
            "workload",
        ),
        (
            "slots:\n" + SLOT + "    workload:\n      command: x\n"
            "      before_end: {command: y, lead: 1s}\n",
            "desired.yaml:11:19: before_end: lead must be between 10s and 1d, got 1s",
        ),
    ],
)
def test_each_mistake_at_its_line(body: str, expected: str) -> None:
    assert expected in problems(HEAD + body)


def test_before_end_on_a_groups_one_program_is_refused() -> None:
    text = (
        HEAD
        + "slots:\n"
        + "  - {name: a, zone: us-central2-b, accelerator: v4-32}\n"
        + "  - {name: b, zone: us-central2-b, accelerator: v4-32}\n"
        + "race_groups:\n  - name: g\n    count: 2\n    slots: [a, b]\n"
        + "    workload: {command: x, across: group, before_end: {command: y}}\n"
    )
    assert any(
        "before_end is not supported on an across: group program" in p for p in problems(text)
    )
