"""The pure doctor checks: each fact pattern gives one status, with a hint when it fails, and a
check whose prerequisite failed is skipped (so a problem is reported once)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.model.desired import Settings
from reconciler.model.load import parse_desired
from reconciler.model.status import StatusSnapshot
from reconciler.runtime import doctor as d
from reconciler.runtime.doctor_compute import ComputeFacts, check_compute_api

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()


def desired(setup: str = "", settings: str = "") -> object:
    text = (
        "project: my-project\n"
        f"settings:\n  poll_interval: 30s\n{settings}"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held"
        f"{', setup: {' + setup + '}' if setup else ''}}}\n"
    )
    return parse_desired(text)


def iso(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).isoformat().replace("+00:00", "Z")


def test_lenient_settings_keep_what_validates_alone() -> None:
    s = d.lenient_settings({"ntfy_topic": "tpu-alerts", "poll_interval": "nope", "bogus": 1})
    assert s.ntfy_topic == "tpu-alerts" and s.poll_interval == 30.0
    assert d.lenient_settings(None, {"backend": "gcloud"}).backend == "gcloud"


def test_invalid_desired_fails_with_its_errors_and_a_hint() -> None:
    c = d.check_desired("d.yaml", None, ["d.yaml:3:1: unknown key 'slotz'"])
    assert c.status == "fail" and "slotz" in c.detail and "validate" in c.hint
    missing = d.check_desired("d.yaml", None, ["d.yaml:1:1: file not found"])
    assert "init" in missing.hint


def test_gcloud_is_needed_by_rest_only_without_a_token_in_the_environment() -> None:
    rest = d.lenient_settings({})
    assert d.gcloud_needed(rest, None) is not None
    assert d.gcloud_needed(rest, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE") is None
    gcloud = d.lenient_settings({"backend": "gcloud"})
    assert d.gcloud_needed(gcloud, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE") == "the gcloud backend"
    assert d.check_gcloud(None, "x").status == "fail"
    assert d.check_gcloud(None, None).status == "skip"


@pytest.mark.parametrize(
    ("facts", "gcloud_problem", "status"),
    [
        (None, True, "skip"),
        (d.AuthFacts(None), True, "skip"),
        (d.AuthFacts("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"), True, "ok"),
        (d.AuthFacts("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", token_error="unreadable"), False, "fail"),
        (d.AuthFacts(None, accounts=[]), False, "fail"),
        (d.AuthFacts(None, accounts=[{"account": "a@x", "status": ""}]), False, "fail"),
        (d.AuthFacts(None, accounts=[{"account": "a@x", "status": "ACTIVE"}]), False, "ok"),
        (
            d.AuthFacts(None, accounts=[{"account": "a", "status": "ACTIVE"}], token_error="no"),
            False,
            "fail",
        ),
        (d.AuthFacts(None, accounts_error="boom"), False, "fail"),
    ],
)
def test_auth(facts: d.AuthFacts | None, gcloud_problem: bool, status: str) -> None:
    c = d.check_auth(facts, gcloud_problem)
    assert c.status == status
    assert bool(c.hint) == (status == "fail")


def test_api() -> None:
    assert d.check_api(None, "no credentials (see auth)").status == "skip"
    assert d.check_api(d.ApiFacts("rest", error="PERMISSION_DENIED"), None).status == "fail"
    assert d.check_api(d.ApiFacts("rest", unreachable=["us-east1-d"]), None).status == "warn"
    assert d.check_api(d.ApiFacts("rest", queued_resources=3), None).detail.endswith(
        "3 queued resources seen"
    )


def test_compute_api() -> None:
    assert check_compute_api(None, "no credentials (see auth)").status == "skip"
    failed = check_compute_api(ComputeFacts(error="PERMISSION_DENIED: no"), None)
    assert failed.status == "fail" and "compute.googleapis.com" in failed.hint
    assert check_compute_api(ComputeFacts(unreachable=["us-east5-a"]), None).status == "warn"
    seen = check_compute_api(ComputeFacts(2), None)
    assert seen.detail == "2 TPU VMs and MIG slices of ours seen"


def test_state_dir_modes_and_owner() -> None:
    def facts(mode: int, uid: int = 1000) -> list[d.PathFacts]:
        return [d.PathFacts("/s", uid, mode, True)]

    assert d.check_state_dir("/s", None, 1000).status == "ok"
    assert d.check_state_dir("/s", facts(0o700), 1000).status == "ok"
    assert d.check_state_dir("/s", facts(0o750), 1000).status == "warn"
    world = d.check_state_dir("/s", facts(0o755), 1000)
    assert world.status == "fail" and "0755" in world.detail and "chmod" in world.hint
    foreign = d.check_state_dir("/s", facts(0o700, uid=0), 1000)
    assert foreign.status == "fail" and "chown" in foreign.hint
    secret = [*facts(0o700), d.PathFacts("/s/secrets/tailscale", 1000, 0o644, False)]
    assert "secrets/tailscale" in d.check_state_dir("/s", secret, 1000).detail


def test_snapshot_staleness_is_three_poll_intervals() -> None:
    fresh = StatusSnapshot(generated_at=iso(80))
    assert d.check_snapshot(fresh, None, NOW, 30.0, True).status == "ok"
    stale = d.check_snapshot(StatusSnapshot(generated_at=iso(100)), None, NOW, 30.0, True)
    assert stale.status == "fail" and "stale" in stale.detail and stale.hint
    # A stopped controller explains an old snapshot: reported once, under controller.
    old = StatusSnapshot(generated_at=iso(100))
    assert d.check_snapshot(old, None, NOW, 30.0, False).status == "skip"
    assert d.check_snapshot(None, "no status snapshot", NOW, 30.0, False).status == "skip"
    assert d.check_snapshot(None, "no status snapshot", NOW, 30.0, True).status == "fail"
    failing = StatusSnapshot(generated_at=iso(5), observe_error="UNAVAILABLE")
    assert d.check_snapshot(failing, None, NOW, 30.0, True).status == "warn"
    junk = StatusSnapshot(generated_at="junk")
    assert d.check_snapshot(junk, None, NOW, 30.0, True).status == "fail"


def test_controller() -> None:
    assert d.check_controller(None).status == "fail"
    assert d.check_controller(42).detail == "running (pid 42)"


def test_tools_are_only_needed_when_a_slot_asks() -> None:
    assert d.check_tmux(None, None).status == "skip"
    assert d.check_tmux([], None).status == "skip"
    assert d.check_tmux(["a-1"], None).status == "fail"
    assert d.check_tmux(["a-1"], "/usr/bin/tmux").status == "ok"
    assert d.check_ssh_agent([], None).status == "skip"
    assert d.check_ssh_agent(["a-1"], d.AgentFacts(None)).status == "fail"
    assert d.check_ssh_agent(["a-1"], d.AgentFacts("/s", keys=0)).status == "fail"
    assert d.check_ssh_agent(["a-1"], d.AgentFacts("/s", error="refused")).status == "fail"
    assert d.check_ssh_agent(["a-1"], d.AgentFacts("/s", keys=2)).detail == "2 keys in the agent"


def test_oslogin_user_needed_only_for_ssh_without_ssh_user() -> None:
    assert d.oslogin_needed(None) is None
    assert d.oslogin_needed(desired("bootstrap: false, tmux: false")) is False  # type: ignore[arg-type]
    assert d.oslogin_needed(desired("tmux: true")) is True  # type: ignore[arg-type]
    with_user = desired("tmux: true", "  ssh_user: alice\n")
    assert d.oslogin_needed(with_user) is False  # type: ignore[arg-type]
    assert d.check_oslogin(True, d.UserFacts("alice", cached=True), None).detail == "alice (cached)"
    assert d.check_oslogin(True, d.UserFacts(None, error="x"), "auth").status == "skip"
    assert d.check_oslogin(True, d.UserFacts(None, error="x"), None).status == "fail"


def test_a_workload_alone_needs_ssh_and_the_os_login_user() -> None:
    from reconciler.runtime import doctor_ssh as ds

    no_ssh = desired("bootstrap: false, tmux: false")
    assert ds.ssh_slots(no_ssh) == ()  # type: ignore[arg-type]
    text = (
        "project: my-project\ndefaults: {setup: {tmux: false}}\nslots:\n"
        "  - {name: w, zone: us-central2-b, accelerator: v4-8, want: held,"
        " workload: {command: python3 train.py}}\n"
        "  - {name: c-1, zone: us-central2-b, accelerator: v4-8}\n"
        "  - {name: c-2, zone: us-central2-b, accelerator: v4-8}\n"
        "  - {name: idle, zone: us-east1-d, accelerator: v4-8, want: held}\n"
        "race_groups:\n  - {name: g, count: 1, slots: [c-1, c-2],"
        " workload: {command: python3 x.py, across: group}}\n"
    )
    workloads = parse_desired(text)
    assert ds.ssh_slots(workloads) == ("w", "c-1", "c-2")
    assert d.oslogin_needed(workloads) is True
    assert ds.ssh_slots(None) is None


def test_the_ssh_key_and_one_login() -> None:
    from reconciler.runtime import doctor_ssh as ds

    missing = ds.check_ssh_key(["w"], ds.KeyFacts("/k", exists=False), None)
    assert missing.status == "fail" and "os-login ssh-keys add" in missing.hint
    locked = ds.KeyFacts("/k", exists=True, encrypted=True, public=True)
    assert ds.check_ssh_key(["w"], locked, d.AgentFacts(None)).status == "fail"
    agent = d.AgentFacts("/s", keys=1)
    assert ds.check_ssh_key(["w"], locked, agent).detail == "/k (passphrase: through the agent)"
    broken = ds.KeyFacts("/k", exists=True, problem="Invalid private key")
    assert "cannot be used: Invalid private key" in ds.check_ssh_key(["w"], broken, None).detail
    assert ds.check_ssh_key([], None, None).status == "skip"
    assert ds.check_ssh_reach(["w"], None, None).detail == ds.NO_LIVE_NODE
    refused = ds.ReachFacts("w", "worker 0 of w@1 (10.0.0.2:22)", "alice", "refused")
    assert ds.check_ssh_reach(["w"], refused, None).status == "fail"


def test_ntfy_topic() -> None:
    assert d.check_ntfy("").status == "skip"
    assert d.check_ntfy("tpu-alerts").status == "warn"
    assert d.check_ntfy("tpu-3f9c2a7b1e4d8c6a5b0f9e2d").status == "ok"


def test_exit_verdict_and_text() -> None:
    checks = [
        d.ok("a", "fine"),
        d.Check("b", "warn", "meh\nsecond line", "do x"),
        d.Check("c", "fail", "bad", "do y"),
        d.skip("d", "n/a"),
    ]
    assert not d.healthy(checks) and d.healthy(checks[:2])
    text = d.format_doctor(checks)
    assert "WARN  b  meh second line\n         fix: do x\n" in text
    assert text.endswith("doctor: 1 problem, 1 warning\n")
    doc = d.doctor_document(checks)
    assert doc["schema_version"] == "tpu-reconciler.doctor.v1" and doc["healthy"] is False
    assert doc["counts"] == {"ok": 1, "warn": 1, "fail": 1, "skip": 1}
    assert doc["checks"][2] == {"name": "c", "status": "fail", "detail": "bad", "hint": "do y"}


def test_auth_through_adc_and_the_quota_line() -> None:
    good = d.check_auth(d.AuthFacts(d.ADC_SOURCE), gcloud_problem=False)
    assert good.status == "ok" and "settings.credentials: adc" in good.detail
    bad = d.check_auth(d.AuthFacts(d.ADC_SOURCE, token_error="DefaultCredentialsError"), False)
    assert bad.status == "fail" and "GOOGLE_APPLICATION_CREDENTIALS" in bad.hint
    adc = Settings(backend="rest", credentials="adc")
    assert d.gcloud_needed(adc, None) is None  # ADC needs no gcloud
    assert d.check_quota_project(None).status == "skip"
    shown = d.check_quota_project(d.ApiFacts("rest", quota="qp-1 (settings.quota_project)"))
    assert (shown.status, shown.detail) == ("ok", "quota project qp-1 (settings.quota_project)")
