"""``init``'s starter file: it validates for every shape of answers, keeps its comments, checks
names before templating them, and never replaces a file unasked."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.model.load import parse_desired
from reconciler.runtime import init as i


@pytest.mark.parametrize("mode", i.MODES)
@pytest.mark.parametrize(
    ("zones", "accelerators", "race"),
    [
        (("us-central2-b",), ("v4-8",), None),
        (("us-central2-b",), ("v4-8",), True),
        (("europe-west4-a", "us-east1-d"), ("v6e-8", "v5litepod-16"), None),
        (("europe-west4-a", "us-east1-d"), ("v6e-8",), False),
    ],
)
def test_starter_validates(
    zones: tuple[str, ...], accelerators: tuple[str, ...], race: bool | None, mode: str
) -> None:
    run = "6h" if mode == "flex-start" else None  # flex-start needs its run length
    starter = i.Starter("my-project", zones, accelerators, mode, race, run)
    text = i.starter_text(starter)
    desired = parse_desired(text)
    assert len(desired.slots) == len(zones) * len(accelerators)
    assert {s.mode for s in desired.slots} == {mode}
    racing = race if race is not None else len(desired.slots) > 1
    assert bool(desired.race_groups) == racing
    if racing:
        assert desired.race_groups[0].count == 1
        assert all(s.want is None for s in desired.slots)
    else:
        assert all(s.want == "held" for s in desired.slots)
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert len(comments) >= 15  # the comments that explain the file are there


def test_duplicates_are_dropped() -> None:
    starter = i.Starter("my-project", ("us-central2-b", "us-central2-b"), ("v4-8", " v4-8 "))
    assert len(parse_desired(i.starter_text(starter)).slots) == 1


@pytest.mark.parametrize(
    ("starter", "message"),
    [
        (i.Starter("x"), "project"),
        (i.Starter("my-project", zones=("us-central2-b; rm -rf /",)), "zone"),
        (i.Starter("my-project", accelerators=("v4_8",)), "accelerator"),
        (i.Starter("my-project", mode="cheap"), "--mode"),
        (i.Starter("my-project", zones=()), "at least one"),
    ],
)
def test_bad_answers_are_refused_before_templating(starter: i.Starter, message: str) -> None:
    with pytest.raises(i.InitError, match=message):
        i.starter_text(starter)


def test_an_accelerator_that_does_not_exist_is_caught_by_validation() -> None:
    text = i.starter_text(i.Starter("my-project", accelerators=("v9z-8",)))
    with pytest.raises(i.InitError, match="no TPU generation is called 'v9z'"):
        i.validate(text, "desired.yaml")


def test_write_new_never_replaces_without_force(tmp_path: Path) -> None:
    path = tmp_path / "desired.yaml"
    i.write_new(path, "project: a\n")
    with pytest.raises(i.InitError, match="exists"):
        i.write_new(path, "project: b\n")
    assert path.read_text() == "project: a\n"
    i.write_new(path, "project: b\n", force=True)
    assert path.read_text() == "project: b\n"
    with pytest.raises(i.InitError, match="cannot write"):
        i.write_new(tmp_path / "no-such-dir" / "desired.yaml", "project: c\n")
