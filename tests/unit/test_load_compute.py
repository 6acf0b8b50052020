"""What Compute Engine cannot do is refused by ``validate`` at its line, not at the first
create: ``mode: reserved`` without a reservation named for the zone, and ``start_after``."""

from __future__ import annotations

import pytest

from reconciler.errors import InvalidDesiredState
from reconciler.model.load import parse_desired

HEAD = "project: my-project-1\n"


def _errors(text: str) -> list[str]:
    with pytest.raises(InvalidDesiredState) as caught:
        parse_desired(text)
    return str(caught.value).splitlines()


def test_reserved_on_compute_needs_the_zones_reservation_named() -> None:
    text = HEAD + (
        "slots:\n"
        "  - {name: a, zone: us-east5-b, accelerator: tpu7x-8, mode: reserved, want: held}\n"
    )
    (line,) = _errors(text)
    assert line.startswith("desired.yaml:3:61: slot 'a': mode: reserved on Compute Engine")
    assert "settings.reservations (us-east5-b: NAME)" in line
    named = HEAD + "settings:\n  reservations: {us-east5-b: my-res}\n" + text[len(HEAD) :]
    (slot,) = parse_desired(named).slots
    assert (slot.api, slot.mode) == ("compute", "reserved")


def test_reserved_on_the_tpu_api_and_a_released_slot_need_no_reservation() -> None:
    text = HEAD + (
        "slots:\n"
        "  - {name: a, zone: us-central2-b, accelerator: v4-8, mode: reserved, want: held}\n"
        "  - {name: b, zone: us-east5-b, accelerator: tpu7x-8, mode: reserved, want: released}\n"
    )
    assert [s.name for s in parse_desired(text).slots] == ["a", "b"]


def test_start_after_is_refused_on_compute_and_kept_on_the_tpu_api() -> None:
    text = HEAD + (
        "slots:\n"
        "  - name: c\n    zone: us-east5-b\n    accelerator: tpu7x-8\n    want: held\n"
        "    start_after: 2h\n"
        "  - {name: d, zone: us-central2-b, accelerator: v4-8, want: held, start_after: 2h}\n"
    )
    (line,) = _errors(text)
    assert line.startswith("desired.yaml:7:18: slot 'c': Compute Engine cannot queue")
    assert "write start_at" in line
    ok = text.replace("    start_after: 2h\n", "    start_at: 2030-01-01T00:00:00Z\n")
    assert {s.name: s.api for s in parse_desired(ok).slots} == {"c": "compute", "d": "tpu"}


def test_a_race_groups_start_after_is_refused_at_the_slot_it_gives_it_to() -> None:
    text = HEAD + (
        "race_groups:\n"
        "  - {name: g, count: 1, slots: [c], start_after: 1h}\n"
        "slots:\n"
        "  - {name: c, zone: us-east5-b, accelerator: tpu7x-8}\n"
    )
    (line,) = _errors(text)
    assert line.startswith("desired.yaml:5:5: slot 'c': Compute Engine cannot queue")
