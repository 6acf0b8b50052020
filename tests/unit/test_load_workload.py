"""The workload: block: inheritance (defaults < generator / race group < slot, field by
field), and every mistake reported at the line to fix with FILE:LINE:COL."""

from __future__ import annotations

import textwrap

import pytest

from reconciler.errors import InvalidDesiredState
from reconciler.model.desired import Desired, WorkloadSpec
from reconciler.model.load import parse_desired

HEAD = "project: my-project-123\n"
SLOT = "  - name: a\n    zone: us-central2-b\n    accelerator: v4-32\n    want: held\n"


def load(text: str) -> Desired:
    return parse_desired(textwrap.dedent(text), "desired.yaml", {})


def workload(d: Desired, name: str = "a") -> WorkloadSpec | None:
    spec = d.slot(name)
    assert spec is not None
    return spec.workload


def problems(text: str) -> list[str]:
    with pytest.raises(InvalidDesiredState) as info:
        load(text)
    return [str(d) for d in info.value.diagnostics]


def test_defaults_on_a_slot_block() -> None:
    w = workload(load(HEAD + "slots:\n" + SLOT + "    workload: {command: python3 train.py}\n"))
    assert w == WorkloadSpec(command="python3 train.py")
    assert (w.restart, w.max_failures, w.stop_grace, w.when_done, w.stall_after) == (
        "on-preemption",
        3,
        60.0,
        "keep",
        None,
    )


def test_every_field_and_argv_commands() -> None:
    text = (
        HEAD
        + "slots:\n"
        + SLOT
        + textwrap.indent(
            textwrap.dedent("""\
        workload:
          command: [python3, -c, "print(1)"]
          workdir: ~/repo
          env: {WANDB_PROJECT: exp, BATCH: 32}
          secret_env: {WANDB_API_KEY: wandb}
          restart: always
          max_failures: 0
          stall_after: 30m
          stop_grace: 5s
          generation: 2
        """),
            "    ",
        )
    )
    w = workload(load(text))
    assert w is not None
    assert w.command == ("python3", "-c", "print(1)") and w.workdir == "~/repo"
    assert dict(w.env) == {"WANDB_PROJECT": "exp", "BATCH": "32"}
    assert dict(w.secret_env) == {"WANDB_API_KEY": "wandb"}
    assert (w.restart, w.max_failures, w.stall_after, w.stop_grace, w.generation) == (
        "always",
        0,
        1800.0,
        5.0,
        2,
    )


def test_inheritance_is_field_by_field_and_generations_add_up() -> None:
    text = (
        HEAD
        + "defaults:\n  workload: {restart: on-failure, max_failures: 5, generation: 1}\n"
        + "slots:\n"
        + SLOT
        + "    workload: {command: train, max_failures: 1, generation: 1}\n"
        + SLOT.replace("name: a", "name: b")
    )
    d = load(text)
    w = workload(d)
    assert w is not None and (w.restart, w.max_failures, w.generation) == ("on-failure", 1, 2)
    assert workload(d, "b") is None  # defaults without a command run nothing


def test_a_race_groups_workload_goes_to_every_candidate_and_a_slot_overrides_it() -> None:
    text = (
        HEAD
        + "slots:\n"
        + SLOT.replace("    want: held\n", "")
        + SLOT.replace("name: a", "name: b").replace("    want: held\n", "")
        + "    workload: {env: {ONLY: b}}\n"
        + "race_groups:\n  - name: g\n    slots: [a, b]\n"
        + "    workload: {command: train, when_done: release}\n"
    )
    d = load(text)
    a, b = workload(d), workload(d, "b")
    assert a is not None and b is not None
    assert a.command == b.command == "train" and a.when_done == b.when_done == "release"
    assert dict(b.env) == {"ONLY": "b"} and not a.env


def test_a_generator_gives_its_slots_a_workload() -> None:
    text = (
        HEAD
        + "generate:\n  - zones: [us-central2-b]\n    accelerators: {v4-8: 2}\n    want: held\n"
        + "    workload: {command: train}\n"
    )
    d = load(text)
    assert [s.workload.command if s.workload else None for s in d.slots] == ["train", "train"]


@pytest.mark.parametrize(
    ("block", "where", "words"),
    [
        ("{comand: train}", "7:16", ["unknown key 'comand'", "did you mean 'command'"]),
        ("{command: ''}", "7:25", ["non-empty command"]),
        ("{command: [python3, '']}", "7:25", ["non-empty string"]),
        ("{command: train, restart: sometimes}", "7:41", ["never", "on-failure"]),
        ("{command: train, env: {1X: a}}", "7:38", ["environment variable name '1X'"]),
        ("{command: train, env: {TPU_RECONCILER_SLOT: a}}", "7:38", ["set by tpu-reconciler"]),
        ("{command: train, env: {A: {b: c}}}", "7:41", ["plain string"]),
        ("{command: train, secret_env: {K: Bad_Name}}", "7:48", ["invalid secret name"]),
        ("{command: train, stall_after: soon}", "7:45", ["duration"]),
        ("{command: train, max_failures: -1}", "7:46", ["max_failures must be at least 0; got -1"]),
        ("{restart: always}", "7:15", ["needs a command"]),
        (
            "{command: train, env: {K: v}, secret_env: {K: k}}",
            "7:61",
            ["'K' is set in both env and secret_env"],
        ),
        (
            "{command: train, restart: always, when_done: release}",
            "7:15",
            ["when_done: release never happens with restart: always"],
        ),
    ],
)
def test_mistakes_are_reported_where_they_are(block: str, where: str, words: list[str]) -> None:
    (only,) = problems(HEAD + "slots:\n" + SLOT + f"    workload: {block}\n")
    assert only.startswith(f"desired.yaml:{where}: "), only
    for word in words:
        assert word in only, only
