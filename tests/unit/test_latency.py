"""The round-trip rules (core/latency): which zone is due for a probe and which node it
dials, how a measurement is smoothed, and which zones show a value."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.latency import (
    PROBE_INTERVAL,
    Probe,
    ZoneLatency,
    due,
    due_probes,
    held_targets,
    smooth,
    zone_values,
)
from reconciler.model.capacity import CapacityRequest
from reconciler.model.observed import NetworkEndpoint, Node, Observation
from tests.support.worlds import Z1, Z2, Z3, active, desired, node, qr, slot, world

NOW = 1_796_032_800.0

WANT = desired(slot("a"), slot("b"), slot("c", Z2), slot("d", Z3))


def _node_with(name: str, zone: str, *ips: tuple[str, str | None]) -> tuple[CapacityRequest, Node]:
    """An ACTIVE QR and its node whose workers have (internal, external) addresses."""
    n = replace(
        node(name, zone), endpoints=tuple(NetworkEndpoint(i, external_ip=e) for i, e in ips)
    )
    return (qr(name, zone, QRState.ACTIVE), n)


# --- which node ---------------------------------------------------------------------------------


def test_one_probe_per_held_zone_to_worker_0_of_its_first_held_slot_in_file_order() -> None:
    seen = world(
        _node_with("b", Z1, ("10.0.0.9", "34.0.0.9")),
        _node_with("a", Z1, ("10.0.0.1", "34.0.0.1"), ("10.0.0.2", "34.0.0.2")),
        _node_with("c", Z2, ("10.1.0.1", "35.0.0.1")),
        qr("d", Z3, QRState.WAITING_FOR_RESOURCES),  # queued: nothing to dial there
    )
    assert due_probes(WANT, seen, {}, NOW) == (
        Probe(Z1, "a", "34.0.0.1", 22),
        Probe(Z2, "c", "35.0.0.1", 22),
    )


def test_the_address_and_port_are_the_ones_the_controller_dials() -> None:
    seen = world(_node_with("a", Z1, ("10.0.0.1", "34.0.0.1")))
    inside = desired(slot("a"), internal_ips=True, ssh_port=2222)
    assert held_targets(inside, seen) == {Z1: Probe(Z1, "a", "10.0.0.1", 2222)}
    no_external = world(_node_with("a", Z1, ("10.0.0.1", None)))
    assert held_targets(desired(slot("a")), no_external)[Z1].ip == "10.0.0.1"


@pytest.mark.parametrize(
    "seen",
    [
        world(qr("a", Z1, QRState.PROVISIONING)),  # not held yet
        world(qr("a", Z1, QRState.ACTIVE)),  # its node not observed
        world(_node_with("a", Z1)),  # no endpoints yet
        world(_node_with("a", Z1, ("10.0.0.1", "203.0.113.7"))),  # the emulator's: no machine
        world(active("x")),  # not a slot of the file
    ],
)
def test_nothing_is_probed_where_no_machine_is_held(seen: Observation) -> None:
    assert due_probes(desired(slot("a")), seen, {}, NOW) == ()


def test_a_documentation_address_gives_way_to_another_held_node_of_the_zone() -> None:
    seen = world(
        _node_with("a", Z1, ("10.0.0.1", "192.0.2.1")),
        _node_with("b", Z1, ("10.0.0.2", "34.0.0.2")),
    )
    assert due_probes(WANT, seen, {}, NOW) == (Probe(Z1, "b", "34.0.0.2", 22),)


def test_no_intent_probes_nothing() -> None:
    assert due_probes(None, world(active("a")), {}, NOW) == ()


# --- when ---------------------------------------------------------------------------------------


def test_a_zone_is_probed_at_most_once_per_interval_and_never_twice_at_once() -> None:
    seen = world(active("a"), active("c", Z2))
    measured = {Z1: ZoneLatency(140.0, NOW - 10), Z2: ZoneLatency(30.0, NOW - PROBE_INTERVAL)}
    assert [p.zone for p in due_probes(WANT, seen, measured, NOW)] == [Z2]
    assert due_probes(WANT, seen, measured, NOW, busy={Z2}) == ()
    assert [p.zone for p in due_probes(WANT, seen, measured, NOW + 50)] == [Z1, Z2]


def test_a_failed_probe_waits_its_interval_too() -> None:
    failed = {Z1: ZoneLatency(None, NOW - 1)}
    assert due_probes(WANT, world(active("a")), failed, NOW) == ()


@given(st.integers(0, 600), st.integers(0, 600))  # whole seconds: NOW - ago is exact
def test_due_is_exactly_interval_elapsed_or_clock_gone_back(ago: int, interval: int) -> None:
    last = ZoneLatency(1.0, NOW - ago)
    assert due(last, NOW, interval) == (ago >= interval)
    assert due(ZoneLatency(1.0, NOW + 3600), NOW)  # a clock set back does not stop the probes
    assert due(None, NOW, interval)


# --- smoothing ----------------------------------------------------------------------------------


def test_the_first_sample_is_taken_as_it_is_then_smoothed() -> None:
    first = smooth(None, 140.0, NOW)
    assert first == ZoneLatency(140.0, NOW)
    second = smooth(first, 180.0, NOW + 60)
    assert second.ms == pytest.approx(160.0) and second.measured_at == NOW + 60


def test_a_failure_is_unknown_and_the_next_sample_starts_afresh() -> None:
    failed = smooth(ZoneLatency(140.0, NOW), None, NOW + 60)
    assert failed == ZoneLatency(None, NOW + 60)
    assert smooth(failed, 90.0, NOW + 120) == ZoneLatency(90.0, NOW + 120)


@given(
    st.floats(0.01, 2000.0),
    st.lists(st.floats(0.01, 2000.0), min_size=1, max_size=20),
)
def test_the_smoothed_value_stays_within_the_samples(first: float, rest: list[float]) -> None:
    value = smooth(None, first, 0.0)
    for i, sample in enumerate(rest, 1):
        value = smooth(value, sample, float(i))
    samples = [first, *rest]
    assert value.ms is not None
    assert min(samples) - 1e-9 <= value.ms <= max(samples) + 1e-9


# --- what status shows --------------------------------------------------------------------------


def test_only_held_zones_show_their_value() -> None:
    seen = world(active("a"), qr("c", Z2, QRState.WAITING_FOR_RESOURCES), active("d", Z3))
    measured = {
        Z1: ZoneLatency(141.26, NOW),
        Z2: ZoneLatency(30.0, NOW),  # measured while held, its node gone since
        Z3: ZoneLatency(None, NOW),  # the last probe failed
    }
    assert zone_values(WANT, seen, measured) == {Z1: 141.3}
    assert zone_values(None, seen, measured) == {}
