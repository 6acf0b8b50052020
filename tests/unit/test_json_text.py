"""core/json_text: ``indented`` writes exactly what ``json.dumps(value, indent=2)`` writes
(``status --json`` and the golden files depend on it), whatever the document holds."""

from __future__ import annotations

import json
from collections import OrderedDict
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.json_text import indented

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "status.json"

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.sampled_from(["", "\n", '"', "\\", "é", "\u2028", "\x00", "\U0001f600"])
)
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(st.integers() | st.booleans() | st.none(), inner, max_size=3)
    ),
    max_leaves=25,
)


@given(documents)
def test_the_text_is_json_dumps_indent_2(value: Any) -> None:
    assert indented(value) == json.dumps(value, indent=2)


def test_the_golden_status_document_reads_the_same() -> None:
    doc = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert indented(doc) + "\n" == GOLDEN.read_text(encoding="utf-8")


class Mapping(dict[str, Any]):
    pass


class Items(list[Any]):
    pass


class Level(IntEnum):
    LOW = 1
    HIGH = 2


@pytest.mark.parametrize(
    "value",
    [
        {"a": Mapping(b=1)},  # a dict subclass is indented as a dict
        {"a": Mapping(b=1, c=[2])},
        [Items([1])],
        [Items([1, 2]), (3,)],
        {"a": OrderedDict(b=OrderedDict(c=1))},
        {"a": 1.5, "b": float("nan"), "c": float("-inf"), "d": -0.0, "e": 10**30, "f": True},
        {"a": "\x00", "b": ["\x00", "\x00x"], "\x00": {"\x00": None}},
        [[], {}, [[]], [{}], ()],
        {"k": Level.HIGH, "l": [Level.LOW]},
    ],
    ids=repr,
)
def test_subclasses_and_odd_scalars_read_the_same(value: Any) -> None:
    assert indented(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize("value", [{"a": [object()]}, {"a": {(1, 2): 1}}, [{1, 2}]])
def test_what_json_refuses_it_refuses_alike(value: Any) -> None:
    with pytest.raises(TypeError) as expected:
        json.dumps(value, indent=2)
    with pytest.raises(TypeError) as refused:
        indented(value)
    assert str(refused.value) == str(expected.value)
