"""The loader's YAML (``model/load_yaml``): libyaml, read as the edits' round trip (ruamel.yaml,
YAML 1.2) reads it. One test per gap between the two libraries that the loader closes, a
property that their values agree on any scalar, and the positions they give every node."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.errors import InvalidDesiredState
from reconciler.intent.roundtrip import load as ruamel_load
from reconciler.model import load_yaml
from reconciler.model.load import parse_desired
from reconciler.model.load_yaml import parse_tree
from tests.reliability._fuzz import desired_texts

REPO = Path(__file__).resolve().parents[2]
H = "project: my-project-123\n"
SLOT = "  - {name: a, zone: us-central2-b, accelerator: v4-8, want: held}\n"


def value(text: str) -> Any:
    return parse_tree(f"k: {text}\n", "d.yaml").data["k"]


def problems(text: str) -> list[str]:
    with pytest.raises(InvalidDesiredState) as info:
        parse_desired(text, "d.yaml")
    return [str(d) for d in info.value.diagnostics]


def test_the_wheel_has_libyaml_and_the_loader_uses_it() -> None:
    assert yaml.__with_libyaml__
    assert load_yaml._FAST is not None


# --- YAML 1.1 (PyYAML) against 1.2 (ruamel, the round trip) -----------------------------------


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "OFF"])
def test_yaml_1_1_booleans_are_text(word: str) -> None:
    assert value(word) == word
    text = H + "slots:\n" + SLOT.replace("}", f", workload: {{command: x, env: {{A: {word}}}}}}}")
    (slot,) = parse_desired(text, "d.yaml").slots
    assert slot.workload is not None and slot.workload.env == (("A", word),)


@pytest.mark.parametrize("word", ["true", "True", "TRUE", "false", "False", "FALSE"])
def test_yaml_1_2_booleans(word: str) -> None:
    assert value(word) is (word.lower() == "true")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("017", 17),  # YAML 1.1 (PyYAML) reads 15: a leading zero is not octal in 1.2
        ("0o17", 15),
        ("0x1F", 31),
        ("-0x1F", -31),
        ("0b101", 5),
        ("1_000", 1000),
        ("+12", 12),
        ("1e3", 1000.0),  # PyYAML: the text '1e3'
        ("1.5e3", 1500.0),
        ("._5", 0.5),
        ("1:30", "1:30"),  # PyYAML: 90 (base 60)
        ("190:20:30", "190:20:30"),
        ("=", "="),
        ("~", None),
        ("", None),
        ("0o", "0o"),
    ],
)
def test_numbers_as_yaml_1_2_reads_them(text: str, expected: object) -> None:
    got = value(text)
    assert got == expected and type(got) is type(expected)


def test_infinity_and_not_a_number() -> None:
    assert value(".inf") == math.inf and value("-.inf") == -math.inf
    assert math.isnan(value(".nan"))


def test_timestamps_stay_text_and_an_impossible_one_is_reported_where_it_is() -> None:
    assert value("2024-01-01") == "2024-01-01"
    assert value("2024-01-01T10:00:00Z") == "2024-01-01T10:00:00Z"
    (said,) = problems(
        H + "slots:\n  - {name: a, zone: us-central2-b, accelerator: v4-8, want: held,\n"
        "     hold_until: 2026-13-01T00:00:00Z}\n"
    )
    assert said.startswith("d.yaml:4:18: ")


def test_a_number_too_long_for_python_is_reported_at_its_place() -> None:
    (said,) = problems(H + "settings: {concurrency: " + "9" * 5000 + "}\n")
    assert said.startswith("d.yaml:2:25: ")


# --- duplicate keys: PyYAML keeps the last silently; every one is refused ---------------------


def test_every_duplicate_key_is_refused_at_its_place() -> None:
    text = H + "slots:\n  - name: a\n    zone: x\n    zone: y\n    want: held\n    want: held\n"
    assert problems(text) == [
        "d.yaml:5:5: duplicate key 'zone': a key may appear only once in a mapping",
        "d.yaml:7:5: duplicate key 'want': a key may appear only once in a mapping",
    ]
    assert problems(H + "settings: {prune: true, prune: false}\n") == [
        "d.yaml:2:25: duplicate key 'prune': a key may appear only once in a mapping"
    ]


# --- merge keys ------------------------------------------------------------------------------


def test_merge_keys_merge_as_the_round_trip_reads_them() -> None:
    text = (
        H + "slots:\n  - &a {name: a, zone: us-central2-b, accelerator: v4-8, want: held}\n"
        "  - <<: *a\n    name: b\n"
        "  - <<: [{zone: us-central2-b, want: released}, *a]\n    name: c\n"
    )
    assert parse_tree(text, "d.yaml").data == plain(ruamel_load(text, "d.yaml"))
    slots = {s.name: s for s in parse_desired(text, "d.yaml").slots}
    assert slots["b"].want == "held" and slots["c"].want == "released"


def test_a_problem_in_a_merged_value_is_reported_where_the_value_is_written() -> None:
    # ruamel keeps no position for a merged key: this crashed the loader (KeyError)
    text = H + "slots:\n  - &a {name: a, zone: us-central2-b, accelerator: v4-8, want: hold}\n"
    text += "  - <<: *a\n    name: b\n"
    assert problems(text) == [
        "d.yaml:3:64: want must be held or released; got 'hold' (did you mean 'held'?)"
    ]


def test_two_merge_keys_in_one_mapping_are_a_duplicate() -> None:
    text = H + "slots:\n" + SLOT.replace("- {", "- &a {") + "  - {<<: *a, <<: *a, name: c}\n"
    assert problems(text) == [
        "d.yaml:4:14: duplicate key '<<': a key may appear only once in a mapping"
    ]


# --- tags ------------------------------------------------------------------------------------


def test_yaml_s_own_tags_are_honoured() -> None:
    assert value("!!str 12") == "12"
    assert value('!!int "30"') == 30
    assert value("!!float 3") == 3.0
    assert value("!!bool true") is True


@pytest.mark.parametrize(
    ("text", "tag", "col"),
    [
        (
            "project: !!python/object/apply:os.system ['touch /x']\n",
            "!!python/object/apply:os.system",
            10,
        ),
        (H + "settings: !!set {a, b}\n", "!!set", 11),
        (H + "slots: !foo []\n", "!foo", 8),
    ],
)
def test_any_other_tag_is_refused_at_its_node(text: str, tag: str, col: int) -> None:
    (said,) = problems(text)
    line = text.count("\n")
    assert (
        said
        == f"d.yaml:{line}:{col}: the YAML tag {tag!r} is not allowed in a desired file; remove it"
    )


# --- characters libyaml reads otherwise -----------------------------------------------------


def test_a_tab_after_a_colon_is_refused_as_the_round_trip_refuses_it() -> None:
    # libyaml takes it; ruamel (and PyYAML's own parser) do not: the loader does not either
    assert yaml.compose("a:\tb\n", Loader=yaml.CSafeLoader) is not None
    assert problems(H + "settings:\n  backend:\trest\n") == [
        "d.yaml:3:11: a tab is not allowed here in YAML; use spaces"
    ]


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029"])
def test_yaml_1_1_line_breaks_are_characters_and_lines_count_newlines(char: str) -> None:
    text = H + f"# a comment{char}with: [it\nsettings:\n  backend: grpc{char}\n"
    got = repr("grpc" + char)
    assert problems(text) == [f"d.yaml:4:12: backend must be gcloud or rest; got {got}"]


def test_a_control_character_is_reported_where_it_is() -> None:
    assert problems(H + "slots:\n  - name: a\x07b\n") == [
        "d.yaml:3:12: character U+0007 is not allowed in a YAML file"
    ]


# --- the round trip and the loader agree ------------------------------------------------------


def plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return str(node)


SCALAR = st.text(alphabet="0123456789_.eE+-xobOXB:~<=tTrRuUfFaAlLsSnNyYiI ", max_size=8)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(SCALAR)
def test_any_scalar_reads_as_the_round_trip_reads_it(text: str) -> None:
    doc = f"k: {text}\n"
    try:
        theirs = plain(ruamel_load(doc, "d.yaml"))["k"]
    except InvalidDesiredState:
        return  # ruamel cannot read it (``0x_``): nothing to agree with
    ours = parse_tree(doc, "d.yaml").data["k"]
    if isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours)
    else:
        assert ours == theirs and type(ours) is type(theirs), (text, ours, theirs)


def _places(node: Any, loc: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool, Any]]:
    """(loc, at the key, ruamel's 1-based position) of every key, value and item."""
    out: list[tuple[tuple[Any, ...], bool, Any]] = []
    if isinstance(node, CommentedMap):
        for k, v in node.items():
            if k not in node.lc.data:
                continue  # merged by ``<<``: ruamel keeps no place for it
            line, col = node.lc.key(k)
            out.append(((*loc, k), True, (line + 1, col + 1)))
            if v is not None:
                line, col = node.lc.value(k)
                out.append(((*loc, k), False, (line + 1, col + 1)))
            out += _places(v, (*loc, k))
    elif isinstance(node, CommentedSeq):
        for i, v in enumerate(node):
            line, col = node.lc.item(i)
            out.append(((*loc, i), False, (line + 1, col + 1)))
            out += _places(v, (*loc, i))
    return out


@pytest.mark.parametrize("name", ["desired.yaml.example", "tests/unit/test_intent.py"])
def test_every_position_is_the_round_trip_s(name: str) -> None:
    if name.endswith(".py"):  # the intent tests' own file, with comments and odd indents
        from tests.unit.test_intent import SAMPLE as text
    else:
        text = (REPO / name).read_text(encoding="utf-8")
    tree = parse_tree(text, "d.yaml")
    places = _places(ruamel_load(text, "d.yaml"))
    assert len(places) > 20
    for loc, key, where in places:
        assert tree.at(loc, key=key) == where, loc


@settings(max_examples=300, deadline=None, derandomize=True)
@given(desired_texts())
def test_any_file_both_read_has_the_same_values(drawn: tuple[str, str, str]) -> None:
    _, _, text = drawn
    if any(c in text for c in "\x85\u2028\u2029"):
        return  # ruamel folds them into spaces in places: the loader keeps them (see above)
    read = []
    for load in (ruamel_load, lambda t, s: parse_tree(t, s).data):
        try:
            read.append(repr(plain(load(text, "d.yaml"))))
        except InvalidDesiredState as e:
            read.append(" ".join(d.message for d in e.diagnostics))
    theirs, ours = read
    if "YAML tag" in ours:
        return  # refused here, built by ruamel (``!!binary``, ``!!set``, ``!foo``)
    if ours[:1] != "{" and any(line.lstrip().startswith(":") for line in text.splitlines()):
        return  # a value with no key (``: v`` starting a line): refused here, read by ruamel
    assert ours == theirs or (theirs[:1] != "{" and ours[:1] != "{"), (theirs, ours)


# --- what the round trip would read otherwise, or refuse -------------------------------------


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("1.0: a\n1: b\n", "2:1"),  # one key to ruamel (1 == 1.0): refused there too
        ("1: a\ntrue: b\n", "2:1"),  # likewise (True == 1)
        ("1: a\n'1': b\n", "2:1"),  # two keys to ruamel, one to the schema ('1')
        ("{null: a, ~: b}\n", "1:11"),
    ],
)
def test_keys_read_alike_are_a_duplicate(text: str, place: str) -> None:
    with pytest.raises(InvalidDesiredState) as info:
        parse_tree(text, "d.yaml")
    (said,) = info.value.diagnostics
    assert str(said).startswith(f"d.yaml:{place}: duplicate key ")
    if "'1'" not in text:
        with pytest.raises(InvalidDesiredState):
            ruamel_load(text, "d.yaml")


def test_a_yaml_1_1_directive_is_refused_where_the_round_trip_would_read_1_1() -> None:
    text = "%YAML 1.1\n---\n" + H + "settings: {prune: yes}\n"
    assert plain(ruamel_load(text, "d.yaml"))["settings"]["prune"] is True  # what ruamel does
    assert problems(text) == [
        "d.yaml:1:1: '%YAML 1.1': a desired file is read as YAML 1.2 (as every edit reads it); "
        "remove this line"
    ]
    assert parse_tree("%YAML 1.2\n---\nk: yes\n", "d.yaml").data == {"k": "yes"}
    assert parse_tree("k: |\n  %YAML 1.1\n", "d.yaml").data == {"k": "%YAML 1.1\n"}


def test_what_only_the_round_trip_refuses_is_said_at_its_place() -> None:
    text = 'k: ["a":b]\n'  # YAML 1.2 allows it; libyaml reads it, ruamel does not
    assert parse_tree(text, "d.yaml").data == {"k": [{"a": "b"}]}
    with pytest.raises(InvalidDesiredState) as info:
        ruamel_load(text, "d.yaml")
    (said,) = info.value.diagnostics
    assert (said.line, said.col) == (1, 8) and "YAML:" not in said.message, said


@pytest.mark.parametrize(
    ("text", "place", "name"),
    [
        ("&anchorproject: my-project-123\n", "1:1", "&anchorproject:"),
        ("a: &x 1\n*x: 2\n", "2:1", "*x:"),
        ("k: [&x? a]\n", "1:5", "&x?"),
    ],
)
def test_an_anchor_name_yaml_1_2_reads_longer_is_refused(text: str, place: str, name: str) -> None:
    with pytest.raises(InvalidDesiredState) as info:
        parse_tree(text, "d.yaml")
    (said,) = info.value.diagnostics
    assert str(said).startswith(f"d.yaml:{place}: {name!r}: YAML 1.2 reads this name"), said
    assert parse_tree('k: "&x: 1"  # *y: 2\n', "d.yaml").data == {"k": "&x: 1"}
    assert parse_tree("a: &x 1\nb: *x\n", "d.yaml").data == {"a": 1, "b": 1}


MEMBER = """\
# bob's slots (desired.d/bob.yaml)
slots:
  - name: b1   # Compute Engine, named by machine type
    zone: us-east5-b
    machine_type: ct6e-standard-4t
    topology: 4x4
    api: compute
    image: projects/my-project/global/images/family/my-image
  - {name: b2, zone: us-central1-c, accelerator: tpu7x-128, topology: 4x4x4, want: released}
  - &on {name: b3, zone: us-central2-b, accelerator: v4-8, api: tpu, want: held}
  - <<: *on
    name: b4
race_groups:
  - name: bg
    count: 1
    slots: [b1]
generate:
  - {zones: [europe-west4-a], accelerators: {v6e-8: 2}, want: released, api: tpu}
"""


def test_a_members_file_with_the_compute_engine_keys_reads_as_the_round_trip_reads_it() -> None:
    from reconciler.model.intent_parts import parse_member, parse_shared

    tree = parse_tree(MEMBER, "desired.d/bob.yaml")
    round_trip = ruamel_load(MEMBER, "desired.d/bob.yaml")
    assert repr(tree.data) == repr(plain(round_trip))
    for loc, key, where in _places(round_trip):
        assert tree.at(loc, key=key) == where, loc
    context = parse_shared(H, "desired.yaml").context
    assert context is not None
    part = parse_member(MEMBER, "desired.d/bob.yaml", owner="bob", context=context)
    b1, b4 = part.desired.slot("b1"), part.desired.slot("b4")
    assert b1 is not None and b1.owner == "bob" and b1.api == "compute"
    assert (b1.topology, b1.machine_type) == ("4x4", "ct6e-standard-4t")
    assert b1.image == "projects/my-project/global/images/family/my-image"
    assert b4 is not None and (b4.api, b4.want) == ("tpu", "held")  # merged from b3
    assert part.places["b1"] == (3, 11) and part.places["b4"] == (12, 11)


def test_flow_nesting_too_deep_for_libyaml_is_refused_by_the_python_parser() -> None:
    """libyaml's C composer recurses on the C stack (100,000 ``[`` crash the process): past
    2,000 levels the pure-Python parser reads it, and its RecursionError is a refusal."""
    from reconciler.model import load_yaml

    assert not load_yaml._too_deep_for_c("a: [[1]]\n" + "b: '[' \n" * 10)
    assert not load_yaml._too_deep_for_c("a: " + "[]" * 5_000 + "\n")  # many, none deep
    deep = "project: " + "[" * 3_000 + "]" * 3_000 + "\n"
    assert load_yaml._too_deep_for_c(deep)
    with pytest.raises(InvalidDesiredState) as info:
        parse_tree(deep, "d.yaml")
    assert str(info.value).startswith("d.yaml:1:")
