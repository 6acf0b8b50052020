"""The ssh command of a tmux window and the validation of what reaches tmux."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.tmux import WantedWindow, session_name, ssh_argv
from reconciler.errors import UnsafeName
from reconciler.model import names

GOOD: dict[str, Any] = {
    "user": "alice_example_com",
    "ip": "34.1.2.3",
    "instance": "spot-v4-8-usc2b-1@1234567890",
    "key": "/home/alice/.ssh/google_compute_engine",
    "known_hosts": "/home/alice/.local/state/tpu-reconciler/d-1/known_hosts",
}


def test_ssh_argv_is_exactly_the_documented_command() -> None:
    assert ssh_argv(**GOOD) == (
        "ssh",
        "-A",
        "-i",
        "/home/alice/.ssh/google_compute_engine",
        "-o",
        "HostKeyAlias=tpu.spot-v4-8-usc2b-1.1234567890.w0",
        "-o",
        "UserKnownHostsFile=/home/alice/.local/state/tpu-reconciler/d-1/known_hosts",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "IdentitiesOnly=yes",
        "-p",
        "22",
        "alice_example_com@34.1.2.3",
    )


def test_ssh_argv_pins_the_same_alias_as_the_bootstrap() -> None:
    argv = ssh_argv(**{**GOOD, "port": 2222, "key": Path(GOOD["key"])})
    alias = names.host_key_alias(GOOD["instance"], 0)
    assert f"HostKeyAlias={alias}" in argv
    assert argv[argv.index("-p") + 1] == "2222"
    # a re-created node (new uid) gets a different alias, so a fresh known_hosts entry
    recreated = ssh_argv(**{**GOOD, "instance": "spot-v4-8-usc2b-1@999"})
    assert f"HostKeyAlias={alias}" not in recreated


def test_ipv6_worker_address_is_accepted_in_canonical_form() -> None:
    assert ssh_argv(**{**GOOD, "ip": "2001:DB8::1"})[-1] == "alice_example_com@2001:db8::1"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("user", "-oProxyCommand=x"),
        ("user", "alice;id"),
        ("user", "Alice"),
        ("ip", "34.1.2.3;id"),
        ("ip", "example.com"),
        ("ip", "-oProxyCommand=x"),
        ("instance", "Bad_Name@1"),
        ("key", "relative/key"),
        ("key", "/home/a b/key"),
        ("key", "/home/%u/key"),
        ("known_hosts", "/state dir/known_hosts"),
        ("known_hosts", '/state"/known_hosts'),
        ("known_hosts", "/state/known_hosts\n"),
        ("port", 0),
        ("port", 70000),
        ("port", True),
    ],
)
def test_ssh_argv_rejects_anything_that_does_not_validate(field: str, value: object) -> None:
    with pytest.raises(UnsafeName):
        ssh_argv(**{**GOOD, field: value})


def test_window_command_round_trips_through_a_shell_unchanged() -> None:
    argv = (*ssh_argv(**GOOD), "echo", "$(id); `id` 'x\" * ~")
    w = WantedWindow(session=session_name("usc2b"), window="spot-v4-8-usc2b-1", argv=argv)
    assert shlex.split(w.command) == list(argv)
    assert w.target == "tpu-usc2b:spot-v4-8-usc2b-1"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session": "usc2b"},
        {"session": "tpu-usc2b:0"},
        {"session": "tpu-Usc2b"},
        {"window": "a.1"},
        {"window": "a:1"},
        {"window": "-a"},
        {"argv": ()},
        {"argv": ("-oX", "y")},
        {"argv": ("ssh", "a\nb")},
        {"environment": {"A=B": "x"}},
        {"environment": {"SSH_AUTH_SOCK": "/tmp/a\x00b"}},
    ],
)
def test_wanted_window_rejects_unsafe_parts(kwargs: dict[str, object]) -> None:
    base: dict[str, object] = {"session": "tpu-usc2b", "window": "a-1", "argv": ("ssh",)}
    with pytest.raises(UnsafeName):
        WantedWindow(**{**base, **kwargs})  # type: ignore[arg-type]


def test_wanted_window_is_a_frozen_value() -> None:
    env = {"SSH_AUTH_SOCK": "/tmp/agent.1"}
    w = WantedWindow(session="tpu-ew4a", window="a-1", argv=["ssh"], environment=env)  # type: ignore[arg-type]
    env["SSH_AUTH_SOCK"] = "changed"
    assert w.argv == ("ssh",) and w.environment["SSH_AUTH_SOCK"] == "/tmp/agent.1"
    assert hash(w.target)


def test_session_name_uses_validated_zone_codes() -> None:
    assert session_name(names.zone_code("europe-west4-a")) == "tpu-ew4a"
    with pytest.raises(UnsafeName):
        session_name("ew4a;x")
