"""The vocabulary module is the one spelling of modes, APIs, backends and wants: the schema,
the CLI's choices, the request bodies and the names all read it."""

from __future__ import annotations

import argparse
from typing import get_args

import pytest

from reconciler.adapters import compute_body, tpu_api_body
from reconciler.errors import InvalidDesiredState
from reconciler.model import accelerators, desired_schema, flex, names, vocabulary
from reconciler.model.load import parse_desired
from reconciler.surfaces.cli import _history, _intent, _ops, _reconcile


def test_each_word_list_is_its_literal() -> None:
    assert vocabulary.MODES == ("spot", "on-demand", "reserved", "flex-start")
    assert vocabulary.APIS == ("tpu", "compute")
    assert vocabulary.BACKENDS == ("gcloud", "rest")
    assert vocabulary.WANTS == ("held", "released")
    constants = (vocabulary.SPOT, vocabulary.ON_DEMAND, vocabulary.RESERVED, vocabulary.FLEX_START)
    assert constants == vocabulary.MODES
    assert (vocabulary.TPU_API, vocabulary.COMPUTE_API) == vocabulary.APIS
    assert (vocabulary.HELD, vocabulary.RELEASED) == vocabulary.WANTS
    assert set(vocabulary.MODE_SHORT) == set(vocabulary.MODES)
    assert set(vocabulary.QUOTA_MODES) == set(vocabulary.MODES) - {vocabulary.FLEX_START}
    assert vocabulary.DEFAULT_MODE in vocabulary.MODES
    assert vocabulary.DEFAULT_API in vocabulary.APIS
    assert vocabulary.DEFAULT_BACKEND in vocabulary.BACKENDS
    assert vocabulary.DEFAULT_WANT in vocabulary.WANTS


def test_the_schema_and_the_request_bodies_read_it() -> None:
    assert desired_schema.Mode is vocabulary.Mode and desired_schema.Want is vocabulary.Want
    assert desired_schema.Backend is vocabulary.Backend and desired_schema.Api is vocabulary.Api
    assert tpu_api_body.MODES == compute_body.MODES == frozenset(vocabulary.MODES)
    assert accelerators.APIS is vocabulary.APIS and flex.MODE == vocabulary.FLEX_START
    assert names.MODE_PREFIX is vocabulary.MODE_SHORT


def _choices(register: object, *argv: str, dest: str) -> tuple[str, ...] | None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register(sub)  # type: ignore[operator]
    chosen = sub.choices[argv[0]]
    for action in chosen._actions:
        if action.dest == dest:
            return tuple(action.choices) if action.choices is not None else None
    raise AssertionError(f"{argv[0]} has no --{dest}")


@pytest.mark.parametrize(
    ("register", "verb", "dest", "words"),
    [
        (_intent.register, "add-slot", "mode", vocabulary.MODES),
        (_intent.register, "add-slot", "want", vocabulary.WANTS),
        (_ops.register, "init", "mode", vocabulary.MODES),
        (_history.register, "history", "mode", vocabulary.MODES),
        (_history.register, "history", "api", vocabulary.APIS),
        (_reconcile.register, "demo", "backend", vocabulary.BACKENDS),
    ],
)
def test_the_cli_offers_the_same_words(
    register: object, verb: str, dest: str, words: tuple[str, ...]
) -> None:
    assert _choices(register, verb, dest=dest) == words


def test_a_mode_outside_the_vocabulary_is_refused_by_the_schema() -> None:
    slot = "{name: a, zone: us-central2-b, accelerator: v4-8, mode: cheap}"
    text = f"project: p\nslots:\n  - {slot}\n"
    with pytest.raises(InvalidDesiredState, match="spot"):
        parse_desired(text, "desired.yaml")
    assert get_args(vocabulary.Mode)[0] == vocabulary.DEFAULT_MODE
