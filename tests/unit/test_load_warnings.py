"""Warnings of a valid desired file (pure): idle_after without telemetry, telemetry without
bootstrap, each at the key that gave the slot its value, one per place written."""

from __future__ import annotations

from reconciler.model.load import parse_desired
from reconciler.model.load_warnings import setup_warnings


def warnings(text: str) -> list[str]:
    return [str(d) for d in setup_warnings(text, parse_desired(text, "desired.yaml", {}))]


HEAD = "project: my-project-123\n"


def test_idle_after_without_telemetry_is_warned_at_the_key() -> None:
    text = HEAD + (
        "slots:\n"
        "  - name: a\n"
        "    zone: us-central2-b\n"
        "    accelerator: v4-32\n"
        "    want: held\n"
        "    workload:\n"
        "      command: python3 train.py\n"
        "      idle_after: 20m\n"
    )
    (only,) = warnings(text)
    assert only.startswith("desired.yaml:9:7: warning: workload.idle_after is set but ")
    assert "setup.telemetry is off for slot 'a'" in only


def test_a_file_that_reads_the_chips_properly_has_no_warning() -> None:
    text = HEAD + (
        "defaults:\n"
        "  setup: {bootstrap: true, telemetry: true}\n"
        "slots:\n"
        "  - name: a\n"
        "    zone: us-central2-b\n"
        "    accelerator: v4-32\n"
        "    want: held\n"
        "    workload: {command: x, idle_after: 20m, take_tpu: true}\n"
        "  - {name: b, zone: us-central2-b, accelerator: v4-32, want: held}\n"
    )
    assert warnings(text) == []
    # take_tpu alone needs no telemetry (the holders are found without the probe's venv)
    plain = HEAD + (
        "slots:\n"
        "  - {name: a, zone: us-central2-b, accelerator: v4-32, want: held,\n"
        "     workload: {command: x, take_tpu: true}}\n"
    )
    assert warnings(plain) == []


def test_telemetry_without_bootstrap_and_defaults_point_at_defaults_once() -> None:
    text = HEAD + (
        "defaults:\n"
        "  workload:\n"
        "    idle_after: 10m\n"
        "slots:\n"
        "  - name: a\n"
        "    zone: us-central2-b\n"
        "    accelerator: v4-32\n"
        "    want: held\n"
        "    setup: {telemetry: true}\n"
        "    workload: {command: x}\n"
        "  - {name: b, zone: us-central2-b, accelerator: v4-32, want: held,\n"
        "     workload: {command: y}}\n"
        "  - {name: c, zone: us-central2-b, accelerator: v4-32, want: held,\n"
        "     workload: {command: z}}\n"
    )
    idle, venv = warnings(text)  # in file order
    assert venv.startswith("desired.yaml:10:13: warning: setup.telemetry is on but ")
    assert "setup.bootstrap is off for slot 'a'" in venv and "still found" in venv
    # b and c inherit idle_after from defaults: one warning there, for both
    assert idle.startswith("desired.yaml:4:5: warning: workload.idle_after is set but ")
    assert "for slot 'b' (and 1 more)" in idle


def test_a_generator_and_a_race_group_are_pointed_at_where_they_set_it() -> None:
    text = HEAD + (
        "generate:\n"
        "  - zones: [us-central2-b]\n"
        "    accelerators: {v4-8: 2}\n"
        "    want: held\n"
        "    workload: {command: x, idle_after: 5m}\n"
        "slots:\n"
        "  - {name: r1, zone: us-central2-b, accelerator: v4-32}\n"
        "race_groups:\n"
        "  - name: g\n"
        "    count: 1\n"
        "    slots: [r1]\n"
        "    workload: {command: y, idle_after: 1h}\n"
    )
    gen, group = warnings(text)
    assert gen.startswith("desired.yaml:6:28: warning: workload.idle_after")
    assert "(and 1 more)" in gen
    assert group.startswith("desired.yaml:13:28: warning: workload.idle_after")
    assert "slot 'r1'" in group
