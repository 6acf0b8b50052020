"""The metrics as values (``core.metrics``) and ``settings.metrics`` (``model.metrics_address``):
the golden list, bounded labels, gauges from a snapshot, counts from event records."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.adapters.tpu_api_parse import request_state
from reconciler.core import metrics as m
from reconciler.model.load import parse_desired
from reconciler.model.metrics_address import parse_metrics_address
from reconciler.model.status import SliceStatus, SlotStatus, StatusSnapshot, WorkloadStatus
from reconciler.runtime.backends import STATE_WORDS

WORDS = frozenset(STATE_WORDS)
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "metrics.txt"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_the_golden_list_holds() -> None:
    assert GOLDEN.read_text().splitlines() == m.golden_lines()


def test_every_metric_and_label_is_documented() -> None:
    text = DOCS.read_text()
    for spec in m.SPECS:
        name = spec.name + ("_total" if spec.type == "counter" else "")
        assert f"`{name}`" in text, name
        for label in spec.labels:
            assert f"`{label}`" in text, (spec.name, label)
            for value in m.allowed_values(spec.name.removeprefix(m.PREFIX), label, STATE_WORDS):
                assert f"`{value}`" in text, (spec.name, label, value)


@pytest.mark.parametrize(
    ("written", "address"),
    [
        (9464, "127.0.0.1:9464"),
        ("9464", "127.0.0.1:9464"),
        ("localhost:0", "127.0.0.1:0"),
        ("127.0.0.2:9464", "127.0.0.2:9464"),
        ("[::1]:9464", "[::1]:9464"),
        ("0.0.0.0:9464", "0.0.0.0:9464"),  # every interface, written so
        ("[::]:9464", "[::]:9464"),
    ],
)
def test_addresses_accepted(written: object, address: str) -> None:
    assert str(parse_metrics_address(written)) == address


@pytest.mark.parametrize(
    ("written", "why"),
    [
        (":9464", "every interface"),
        ("metrics.example.com:9464", "host name"),
        ("127.0.0.1:70000", "out of range"),
        ("::1:9464", "expected a port"),
        ("[127.0.0.1]:9464", "IPv6 address in brackets"),
        (True, "expected a port"),
    ],
)
def test_addresses_refused(written: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_metrics_address(written)


def test_a_refused_address_is_reported_at_its_place_in_the_file() -> None:
    text = "project: my-proj-123\nsettings:\n  metrics: 'box:9464'\nslots: []\n"
    with pytest.raises(Exception, match=r"desired\.yaml:3:12: metrics: .*host name"):
        parse_desired(text, "desired.yaml")
    ok = parse_desired(text.replace("box", "0.0.0.0"), "desired.yaml")
    assert ok.settings.metrics == "0.0.0.0:9464"
    off = parse_desired(text.replace("settings:\n  metrics: 'box:9464'\n", ""), "desired.yaml")
    assert off.settings.metrics is None


def test_labels_are_bounded() -> None:
    known = m.Known(zones=frozenset({"mars-north1-z"}), accelerators=frozenset({"v6e-12"}))
    assert m.zone_label("mars-north1-z", known) == "mars-north1-z"  # the file names it
    assert m.zone_label("us-central2-b", m.Known()) == "us-central2-b"  # the catalogue knows it
    assert m.zone_label("mars-north1-z", m.Known()) == "other"
    assert m.accelerator_label("v6e-12", known) == "v6e-12"
    assert m.accelerator_label("v6e-12", m.Known()) == "other"  # not a power of two
    assert m.accelerator_label("v4-4096", m.Known()) == "v4-4096"
    assert m.accelerator_label("v99-8", m.Known()) == "other"
    assert m.mode_label("?") == "other"
    assert m.restart_cause("failed: exit 1 on worker 2") == "failed"
    assert m.restart_cause("run 7f3a: weird") == "other"


def test_gauges_from_a_snapshot() -> None:
    snapshot = StatusSnapshot(
        slots=(
            SlotStatus("a", "us-central2-b", "v4-32", "spot", managed=True, state="ACTIVE"),
            SlotStatus(
                "b",
                "us-central2-b",
                "v4-32",
                "spot",
                managed=True,
                state="ACTIVE",
                workload=WorkloadStatus(state="running", run_id="r-1"),
            ),
            SlotStatus("c", "europe-west4-a", "v6e-8", "spot", managed=True, state="NOT_QUEUED"),
            SlotStatus("x", "nowhere-west9-q", "v6e-8", "spot", managed=False, state="BOGUS"),
            SlotStatus(
                "ce", "us-central2-b", "v4-32", "spot", managed=True, state="ACTIVE", api="compute"
            ),
            SlotStatus("odd", "us-central2-b", "v4-32", "spot", managed=True, api="gke"),
        ),
        in_flight=("us-central2-b/a:cloud",),
    )
    g = m.gauges(snapshot, WORDS)
    assert g.slots == {
        ("ACTIVE", "us-central2-b", "v4-32", "spot", "tpu"): 2,  # a row that does not say: tpu
        ("NOT_QUEUED", "europe-west4-a", "v6e-8", "spot", "tpu"): 1,
        ("other", "other", "v6e-8", "spot", "tpu"): 1,
        ("ACTIVE", "us-central2-b", "v4-32", "spot", "compute"): 1,  # another API: another place
        ("NOT_QUEUED", "us-central2-b", "v4-32", "spot", "other"): 1,  # bounded
    }
    assert g.chips_held == {  # 16 chips each
        ("us-central2-b", "v4-32", "spot", "tpu"): 32,
        ("us-central2-b", "v4-32", "spot", "compute"): 16,
    }
    two = SliceStatus(0, "b-0", "READY"), SliceStatus(1, "b-1", "READY")
    multi = replace(snapshot, slots=(replace(snapshot.slots[1], slices=two),))
    held = m.gauges(multi, WORDS).chips_held
    assert held == {("us-central2-b", "v4-32", "spot", "tpu"): 32}  # 2 slices
    assert g.workloads[("running",)] == 1 and g.workloads[("failed",)] == 0
    assert g.in_flight == 1 and g.desired_valid == 0


def qr(slot: str, zone: str, after: str | None) -> dict[str, object]:
    """A ``qr.state`` record as the controller writes it: the TPU API's word and, beside it,
    the neutral state."""
    told = {"api": "tpu", "request": request_state(after).value} if after else {}
    return {"kind": "qr.state", "slot": slot, "zone": zone, "after": after, **told}


def test_events_count_actions_errors_preemptions_waits_and_races() -> None:
    fold = m.EventFold()
    fold.intent(
        {
            "a": m.SlotInfo("europe-west4-a", "v6e-8", "spot", "g"),
            "b": m.SlotInfo("us-east1-d", "v6e-8", "spot", "g"),
        }
    )
    assert fold.fold({"kind": "action.succeeded", "action": "create"}, 0) == [
        m.Count("actions", ("create", "succeeded"))
    ]
    assert fold.fold({"kind": "action.failed", "action": "x", "retry": "permanent"}, 0) == [
        m.Count("actions", ("other", "failed")),
        m.Count("errors", ("action", "permanent")),
    ]
    assert fold.fold({"kind": "observe.failed", "retry": "transient"}, 0) == [
        m.Count("errors", ("observe", "transient"))
    ]
    assert fold.fold({"kind": "history.failed", "error": "disk"}, 0) == [
        m.Count("history_write_failures")
    ]
    assert fold.fold(qr("a", "europe-west4-a", "WAITING_FOR_RESOURCES"), 100) == []
    assert fold.fold(qr("b", "us-east1-d", "WAITING_FOR_RESOURCES"), 110) == []
    won = fold.fold(qr("b", "us-east1-d", "ACTIVE"), 400)
    place = ("us-east1-d", "v6e-8", "spot", "tpu")
    assert won == [
        m.Observe("queue_wait_seconds", 290.0, place),
        m.Observe("race_duration_seconds", 300.0),  # a had been queued 300 s
    ]
    assert fold.fold(qr("b", "us-east1-d", "SUSPENDED"), 500) == [m.Count("preemptions", place)]


def test_the_dashboard_uses_the_documented_names_and_labels() -> None:
    import json
    import re

    board = json.loads((DOCS.parent / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    used = {n for e in exprs for n in re.findall(r"\b(tpu_reconciler_[a-z_]+)", e)}
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
    family = {s.name + suffix: s.name for s in m.SPECS for suffix in suffixes[s.type]}
    assert used and used <= family.keys(), used - family.keys()
    assert {family[u] for u in used} == {s.name for s in m.SPECS}  # every metric is shown
    labels = {label for s in m.SPECS for label in s.labels} | {"le"}
    for e in exprs:
        for group in re.findall(r"by \(([^)]*)\)", e):
            assert {g.strip() for g in group.split(",")} <= labels, e


def test_a_workload_attempt_followed_by_another_of_its_run_is_a_restart_by_its_cause() -> None:
    from reconciler.runtime.metrics import Metrics
    from tests.unit.test_workload_ended import RUNNING, WorkloadMemory, _mem

    metrics = Metrics()

    def restarts(cause: str) -> float | None:
        name = f"{m.PREFIX}workload_restarts_total"
        return metrics.registry.get_sample_value(name, {"cause": cause})

    again = WorkloadMemory(
        run_id="g0-x", generation=0, identity="i", attempt=2, failures=1,
        phase="pending", detail="exit 1 on worker 0",
    )  # fmt: skip
    metrics.workloads_moved(_mem(RUNNING), _mem(again))
    assert restarts("failed") == 1
    fresh = WorkloadMemory(run_id="g1-y", generation=1, identity="i")  # a new run: no restart
    metrics.workloads_moved(_mem(RUNNING), _mem(fresh))
    assert restarts("superseded") == 0 and restarts("failed") == 1
