"""Round trip from this machine to each zone: which zone is due for a probe, and how a
measurement is kept.

``status`` shows it in its LATENCY column (``~140ms``) and ``slots[].latency_ms``: the TCP
connect time to a held node's SSH port, kept per zone. The controller measures it off the
critical path (``adapters/latency`` dials, ``runtime/latency`` runs the probe beside the pass):

- a zone is *held* when a slot of the file has its request ACTIVE there and its node has an address
  that a machine can stand behind (not a documentation address: the emulator's nodes);
- a held zone is due for a probe when it was never measured, or ``PROBE_INTERVAL`` has passed
  since its last measurement (at most one probe per zone per interval, none while one runs);
- the probe dials worker 0 of the first such slot in file order, as the controller would dial
  it (``settings.internal_ips``, ``settings.ssh_port``); a slot reached through an
  ``ssh_proxy`` is never probed: a TCP connect cannot go through the proxy, and a round trip
  through it would time the proxy (IAP's, a bastion's), not the zone;
- a failed probe is *unknown* (``ms`` None, shown as ``-``); a measurement is smoothed with the
  zone's last one (EWMA) so one slow handshake does not make the column jump;
- only held zones show a value: a zone whose node is gone shows ``-`` at once.

Pure: the time is an argument; nothing here dials.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from reconciler.model.addresses import is_documentation_address
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation

PROBE_INTERVAL: Final = 60.0  # seconds between two probes of one zone
SMOOTHING: Final = 0.5  # weight of a new sample against the zone's last value


@dataclass(frozen=True, slots=True)
class ZoneLatency:
    """A zone's round trip as last measured: ``ms`` smoothed, None when that probe failed."""

    ms: float | None
    measured_at: float


@dataclass(frozen=True, slots=True)
class Probe:
    """One connect to make: ``ip:port`` is worker 0 of ``slot``'s node in ``zone``."""

    zone: str
    slot: str
    ip: str
    port: int


def held_targets(desired: Desired, observation: Observation) -> dict[str, Probe]:
    """Per held zone, the node a probe dials: worker 0 of its first held slot in file order."""
    internal = desired.settings.internal_ips
    targets: dict[str, Probe] = {}
    for spec in desired.slots:
        if spec.zone in targets or not spec.ssh_proxy.direct:
            continue
        request = observation.request(spec.zone, spec.name)
        if request is None or request.state != RequestState.ACTIVE:
            continue
        node = observation.node(spec.zone, request.node_name or spec.name)
        ips = node.ips(internal=internal) if node is not None else ()
        if ips and ips[0] and not is_documentation_address(ips[0]):
            targets[spec.zone] = Probe(spec.zone, spec.name, ips[0], desired.settings.ssh_port)
    return targets


def due(last: ZoneLatency | None, now: float, interval: float = PROBE_INTERVAL) -> bool:
    """True when a zone last measured ``last`` may be probed at ``now`` (also when the clock
    went back past the last measurement, which would otherwise stop its probes for as long)."""
    if last is None:
        return True
    return now - last.measured_at >= interval or now < last.measured_at


def due_probes(
    desired: Desired | None,
    observation: Observation,
    latency: Mapping[str, ZoneLatency],
    now: float,
    *,
    busy: Collection[str] = (),
    interval: float = PROBE_INTERVAL,
) -> tuple[Probe, ...]:
    """The probes to start now: one per held zone that is due and has none running (``busy``)."""
    if desired is None:
        return ()
    return tuple(
        probe
        for zone, probe in held_targets(desired, observation).items()
        if zone not in busy and due(latency.get(zone), now, interval)
    )


def smooth(last: ZoneLatency | None, sample_ms: float | None, now: float) -> ZoneLatency:
    """The zone's value after a probe that measured ``sample_ms`` (None: it failed, unknown).
    The first sample after none (or after a failure) is taken as it is."""
    if sample_ms is None:
        return ZoneLatency(None, now)
    if last is None or last.ms is None:
        return ZoneLatency(sample_ms, now)
    return ZoneLatency(SMOOTHING * sample_ms + (1.0 - SMOOTHING) * last.ms, now)


def zone_values(
    desired: Desired | None, observation: Observation, latency: Mapping[str, ZoneLatency]
) -> dict[str, float]:
    """What ``status`` shows per zone, in milliseconds (0.1 ms): the held zones with a known
    value; a zone missing here shows ``-``."""
    if desired is None:
        return {}
    out: dict[str, float] = {}
    for zone in held_targets(desired, observation):
        value = latency.get(zone)
        if value is not None and value.ms is not None:
            out[zone] = round(value.ms, 1)
    return out
