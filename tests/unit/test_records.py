"""reconciler/records: frozen records behave as the frozen dataclasses mypy takes them for.

Each behaviour is checked against a real ``dataclasses.dataclass(frozen=True)`` twin declared
with the same fields, so "as dataclasses do it" is measured, not remembered.
"""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from typing import Any, ClassVar

import pytest

from reconciler import records
from reconciler.records import FrozenInstanceError, field, fields, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    kind: ClassVar[str] = "point"


@dataclasses.dataclass(frozen=True)
class PointTwin:
    x: int
    y: int = 0
    tags: dict[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    kind: ClassVar[str] = "point"


@record(frozen=True)
class Point3(Point):
    z: int = 0
    y: int = 5  # redefined: keeps its place, takes the new default


@dataclasses.dataclass(frozen=True)
class Point3Twin(PointTwin):
    z: int = 0
    y: int = 5


def test_init_by_position_keyword_and_default_as_a_dataclass() -> None:
    for cls, twin in ((Point, PointTwin), (Point3, Point3Twin)):
        for args, kwargs in (((1,), {}), ((1, 2), {}), ((), {"x": 1, "y": 2}), ((1,), {"y": 3})):
            ours, theirs = cls(*args, **kwargs), twin(*args, **kwargs)
            assert {f.name: getattr(ours, f.name) for f in fields(ours)} == dataclasses.asdict(
                theirs
            )
    assert [f.name for f in fields(Point3)] == [f.name for f in dataclasses.fields(Point3Twin)]
    assert Point3(1).y == 5 and Point.y == PointTwin.y == 0  # plain defaults stay on the class
    assert "tags" not in vars(Point) and "tags" not in vars(PointTwin)  # a factory's does not
    assert Point.__match_args__ == PointTwin.__match_args__ == ("x", "y", "tags")


def test_a_default_factory_gives_each_instance_its_own_value() -> None:
    a, b = Point(1), Point(2)
    assert a.tags == {} and a.tags is not b.tags


@record(frozen=True)
class Three:
    a: int
    b: int
    c: int


@dataclasses.dataclass(frozen=True)
class ThreeTwin:
    a: int
    b: int
    c: int


@pytest.mark.parametrize(
    ("cls", "twin", "args", "kwargs"),
    [
        (Point, PointTwin, (), {}),
        (Point, PointTwin, (1,), {"z": 1}),
        (Point, PointTwin, (1,), {"x": 2}),
        (Point, PointTwin, (1, 2, {}, 4), {}),
        (Three, ThreeTwin, (), {}),
        (Three, ThreeTwin, (1,), {}),
        (Three, ThreeTwin, (1, 2, 3, 4), {}),
    ],
)
def test_bad_arguments_raise_the_type_error_a_dataclass_raises(
    cls: type, twin: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(TypeError) as ours:
        cls(*args, **kwargs)
    with pytest.raises(TypeError) as theirs:
        twin(*args, **kwargs)
    assert str(ours.value) == str(theirs.value).replace(twin.__name__, cls.__name__)


def test_frozen_as_a_dataclass() -> None:
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError is one too
        del p.y  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    assert p.x == 1 and p.y == 0


def test_equality_hash_and_repr_as_a_dataclass() -> None:
    assert Point(1, 2) == Point(1, 2, {"ignored": "by eq"}) and Point(1) != Point(2)
    assert hash(Point(1, 2)) == hash(Point(1, 2, {"a": "b"}))
    assert Point(1) != PointTwin(1)  # another class is never equal
    assert repr(Point(1, 2)) == "Point(x=1, y=2)" and repr(PointTwin(1, 2)) == "PointTwin(x=1, y=2)"
    assert repr(Point3(1)) == "Point3(x=1, y=5, z=0)"


def test_replace_copies_with_changes_and_checks_names() -> None:
    p = Point(1, 2, {"a": "b"})
    q = replace(p, y=7)
    assert (q.x, q.y, q.tags) == (1, 7, {"a": "b"}) and (p.y, type(q)) == (2, Point)
    with pytest.raises(TypeError, match="unexpected keyword argument 'w'"):
        replace(p, w=1)


def test_records_pickle_and_are_not_dataclasses_at_run_time() -> None:
    p = Point3(1, 2, z=3)
    assert pickle.loads(pickle.dumps(p)) == p
    assert records.is_record(p) and records.is_record(Point3) and not records.is_record(PointTwin)
    assert not dataclasses.is_dataclass(p)  # documented: use records.replace / records.fields
    with pytest.raises(TypeError):
        dataclasses.replace(p, x=2)  # type: ignore[misc]


def test_what_records_do_not_do_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="frozen=True"):

        @record  # not frozen
        class Loose:
            x: int

    with pytest.raises(TypeError, match="order"):

        @record(frozen=True, order=True)
        class Ordered:
            x: int

    with pytest.raises(TypeError, match="__post_init__"):

        @record(frozen=True)
        class Checked:
            x: int

            def __post_init__(self) -> None:
                pass

    with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):

        @record(frozen=True)
        class Misordered:
            x: int = 0
            y: int  # type: ignore[misc]

    with pytest.raises(ValueError, match="mutable default"):

        @record(frozen=True)
        class Shared:
            x: list[int] = []  # type: ignore[misc]


def test_status_imports_neither_dataclasses_nor_argparse() -> None:
    """The point of records: ``status``'s modules load without ``dataclasses``/``inspect``."""
    code = (
        "import sys\n"
        "import reconciler.model.status, reconciler.adapters.status_file\n"
        "import reconciler.adapters.statedir, reconciler.runtime.lock, reconciler.core.render\n"
        "print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
