"""Validation of everything that reaches SSH, and the Tailscale command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters import tailscale
from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.ssh import SshOptions, Worker, workers_of
from reconciler.errors import UnsafeName


def test_workers_accept_ips_only() -> None:
    assert workers_of(["10.0.0.2", "10.0.0.3"], port=2222) == (
        Worker(0, "10.0.0.2", 2222),
        Worker(1, "10.0.0.3", 2222),
    )
    for host in ("-oProxyCommand=x", "host name", "a;b", ""):
        with pytest.raises(UnsafeName):
            Worker(0, host)
    for port in (0, 70000, True):
        with pytest.raises(UnsafeName):
            Worker(0, "10.0.0.2", port)
    with pytest.raises(UnsafeName):
        Worker(-1, "10.0.0.2")


def test_options_are_explicit_and_checked(tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "known_hosts")
    opts = SshOptions(user="alice_example_com", known_hosts=store)
    assert opts.key_path == Path.home() / ".ssh" / "google_compute_engine"
    assert opts.agent_path is None
    with pytest.raises(UnsafeName):
        SshOptions(user="-oProxyCommand", known_hosts=store)
    with pytest.raises(TypeError, match="never off"):
        SshOptions(user="alice", known_hosts=None)  # type: ignore[arg-type]
    with pytest.raises(UnsafeName):
        SshOptions(user="alice", known_hosts=store, agent_path="relative/sock")
    with pytest.raises(ValueError):
        SshOptions(user="alice", known_hosts=store, script_timeout=0)
    with pytest.raises(ValueError):
        SshOptions(user="alice", known_hosts=store, concurrency=0)


def test_tailscale_hostnames_and_command_carry_no_secret() -> None:
    assert tailscale.hostname_for("spot-v4-32-usc2b-1", 0) == "spot-v4-32-usc2b-1"
    assert tailscale.hostname_for("spot-v4-32-usc2b-1", 3) == "spot-v4-32-usc2b-1-w3"
    long = "a" * 63
    assert tailscale.hostname_for(long, 12) == "a" * 59 + "-w12"
    with pytest.raises(UnsafeName):
        tailscale.hostname_for("Bad_Name", 0)
    command = tailscale.up_command("slot-a", timeout=90.5)
    assert "--auth-key=file:/dev/stdin" in command and "--hostname=slot-a" in command
    assert "--timeout=91s" in command and "sudo -n" in command
    assert tailscale.backend_state(b'{"BackendState": "Running"}') == "Running"
    assert tailscale.backend_state(b"failed to connect to local tailscaled") is None
