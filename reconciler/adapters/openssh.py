"""The OpenSSH command line to a TPU worker, pinned to the node instance's host key.

One definition for every place that hands a user an ``ssh``: the tmux window the controller
opens (``adapters.tmux``), ``tpu-reconciler ssh`` (which execs it), the TUI's ``s`` key and
info pane, and the MCP ``ssh_command`` view. Agent forwarding (``-A``) is on, so private
repositories can be cloned from the node; host keys come from the state directory's
``known_hosts`` under ``names.host_key_alias`` (shared with the asyncssh bootstrap). A worker
reached through its slot's ``ssh_proxy`` gets ``-o ProxyCommand=...`` for its hop
(``ssh_proxy.proxy_command``: the proxy's argv, or ``ssh -W`` through the jump host); its key
is still pinned under its own alias.

May: validate and build argument lists. May not: run anything, read files, import libtmux.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Final

from reconciler.adapters.ssh_proxy import Hop, proxy_command
from reconciler.errors import UnsafeName
from reconciler.model import names

UNSAFE_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")
#: Characters an ssh ``-o Option=value`` would split on or expand (``%h``, ``~``, quotes).
_SSH_OPTION_UNSAFE: Final = re.compile(r"[\s\"'%\\]")


def check_text(kind: str, value: object) -> str:
    if not isinstance(value, str) or not value or UNSAFE_CHARS.search(value):
        raise UnsafeName(f"invalid {kind} {value!r}: expected non-empty text without controls")
    return value


def check_path(kind: str, value: str | Path) -> str:
    text = check_text(kind, str(value))
    if not text.startswith("/") or _SSH_OPTION_UNSAFE.search(text):
        raise UnsafeName(
            f"invalid {kind} {text!r}: expected an absolute path without spaces, quotes, "
            "backslashes or '%' (ssh would split or expand them)"
        )
    return text


def check_ip(value: object) -> str:
    try:
        return str(ipaddress.ip_address(value))  # type: ignore[arg-type]
    except ValueError:
        raise UnsafeName(f"invalid IP address {value!r}") from None


def ssh_argv(
    *,
    user: str | None,
    ip: str,
    instance: str,
    key: str | Path,
    known_hosts: str | Path,
    port: int = 22,
    worker: int = 0,
    ssh: str = "ssh",
    hop: Hop | None = None,
) -> tuple[str, ...]:
    """The OpenSSH command for a worker, pinned to the node *instance*'s known_hosts entry.

    ``instance`` is ``Node.instance``; ``known_hosts`` is ``StateDir.known_hosts`` (shared with
    the asyncssh bootstrap, which pins keys under the same ``names.host_key_alias``). ``port``
    is the SSH port (22 on TPU VMs; ``NetworkEndpoint.port`` is the TPU runtime's, not ssh's).
    ``hop``: the worker's way through its slot's ``ssh_proxy`` (``Worker.hop``), if any.
    Raises UnsafeName for anything that does not validate.
    """
    alias = names.host_key_alias(instance, worker)
    if not re.fullmatch(r"tpu\.[a-z0-9-]+\.[a-z0-9]+\.w[0-9]+", alias):
        raise UnsafeName(f"invalid host key alias {alias!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise UnsafeName(f"invalid SSH port {port!r}")
    program = check_text("ssh program", ssh)
    if program.startswith("-"):
        raise UnsafeName(f"invalid ssh program {program!r}")
    key_text = check_path("SSH key path", key)
    pins = check_path("known_hosts path", known_hosts)
    address = check_ip(ip)
    via: tuple[str, ...] = ()
    if hop is not None:
        login = names.check_user(user) if user is not None else None
        command = proxy_command(
            hop, key=key_text, known_hosts=pins, worker_host=address, worker_port=port, user=login
        )
        via = ("-o", f"ProxyCommand={check_text('proxy command', command)}")
    return (
        program,
        "-A",
        "-i",
        key_text,
        "-o",
        f"HostKeyAlias={alias}",
        "-o",
        f"UserKnownHostsFile={pins}",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "IdentitiesOnly=yes",
        *via,
        "-p",
        str(port),
        f"{names.check_user(user)}@{address}" if user is not None else address,
    )
