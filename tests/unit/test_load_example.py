"""desired.yaml.example: it validates, documents every key of the schema, shows scalar settings
at their real defaults, and no truncation or damage of it can crash the loader."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from reconciler.errors import InvalidDesiredState
from reconciler.model.desired import Desired, DesiredFile, Settings
from reconciler.model.load import parse_desired

EXAMPLE = Path(__file__).resolve().parents[2] / "desired.yaml.example"
TEXT = EXAMPLE.read_text(encoding="utf-8")


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    seen.add(model)
    for f in model.model_fields.values():
        stack: list[Any] = [f.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                _models(t, seen)
            stack.extend(getattr(t, "__args__", ()))


def _schema_keys() -> list[tuple[str, str]]:
    seen: set[type[BaseModel]] = set()
    _models(DesiredFile, seen)
    return sorted((m.__name__, k) for m in seen for k in m.model_fields)


def test_the_example_validates() -> None:
    d = parse_desired(TEXT, str(EXAMPLE))
    assert isinstance(d, Desired)


def test_the_example_shows_the_trc_shapes_it_promises() -> None:
    d = parse_desired(TEXT)
    held = [s for s in d.slots if s.want == "held" and s.accelerator == "v4-8" and not s.generated]
    assert held, "a held v4-8"
    (race,) = d.race_groups
    candidates = [d.slot(n) for n in race.slots]
    assert all(c is not None and c.accelerator == "v6e-8" for c in candidates)
    assert len({c.zone for c in candidates if c is not None}) == 2, "racing across two zones"
    assert any(s.generated for s in d.slots), "a generator"


@pytest.mark.parametrize(("model", "key"), _schema_keys())
def test_every_key_of_the_schema_is_documented(model: str, key: str) -> None:
    """Shown as a key, or as a commented-out key, somewhere in the example."""
    assert re.search(rf"^\s*(#\s*)?(- )?{key}:", TEXT, re.M), f"{model}.{key} is not in the example"


# Maps and lists have no interesting default (empty): the example fills them in to show the shape.
FILLED_IN = {"subnets", "zone_codes", "runtime_versions", "setup_scripts"}


def test_scalar_settings_are_shown_at_their_defaults() -> None:
    """So the example cannot drift from the schema: a changed default fails here. Settings
    whose default is unset stay commented out."""
    shown = parse_desired(TEXT).settings
    for name in Settings.model_fields.keys() - FILLED_IN:
        assert getattr(shown, name) == getattr(Settings(), name), name


def test_env_overrides_are_documented() -> None:
    assert "TPU_RECONCILER_POLL_INTERVAL" in TEXT and "TPU_RECONCILER_PROJECT" in TEXT


# --- damaged copies never crash the loader ------------------------------------------------------


def _parses_or_refuses(text: str) -> None:
    try:
        parse_desired(text)
    except InvalidDesiredState as e:
        assert e.diagnostics


def test_every_line_prefix_parses_or_is_refused() -> None:
    lines = TEXT.splitlines(keepends=True)
    for n in range(len(lines) + 1):
        _parses_or_refuses("".join(lines[:n]))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(TEXT)))
def test_every_prefix_parses_or_is_refused(cut: int) -> None:
    """A half-saved file (cut anywhere, even mid-word) is refused, never a crash."""
    _parses_or_refuses(TEXT[:cut])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(TEXT)), st.integers(0, 40), st.text(max_size=8))
def test_spliced_damage_parses_or_is_refused(at: int, drop: int, insert: str) -> None:
    _parses_or_refuses(TEXT[:at] + insert + TEXT[at + drop :])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab-: \n\t[]{}'\"#&*!|>%@`,?0129.")), max_size=60))
def test_yaml_shaped_noise_parses_or_is_refused(text: str) -> None:
    _parses_or_refuses(text)
