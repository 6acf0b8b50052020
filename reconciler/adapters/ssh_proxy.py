"""The hop a worker is reached by when its slot has an ``ssh_proxy``, and its command lines.

``Worker.hop`` (``ssh_values``) carries one of:

- ``CommandHop``: run ``argv`` (the program first, every ``%`` token already filled in) and
  speak SSH over its stdin and stdout. ``iap`` is one: ``gcloud compute start-iap-tunnel VM
  PORT --listen-on-stdin --project=P --zone=Z --verbosity=warning``, the command gcloud's own
  ``compute tpus tpu-vm ssh --tunnel-through-iap`` puts in OpenSSH's ProxyCommand
  (``googlecloudsdk/command_lib/util/ssh/ssh.py``, ``_BuildIapTunnelProxyCommandArgs``), with the
  worker's VM name: for a TPU API node the ``hostname`` guest attribute of that worker (what
  gcloud reads, ``command_lib/compute/tpus/tpu_vm/ssh.py``; ``worker_names``), for a Compute
  Engine instance its own name. IAP reaches the VM by name; its address plays no part.
- ``JumpHop``: log in to an SSH jump host and open a ``direct-tcpip`` channel through it to
  the worker (OpenSSH's ProxyJump). Its host key is pinned like a worker's, under
  ``jump_alias``; the workers' keys stay pinned per node instance and worker, whatever the hop.

``hop_for`` builds a worker's hop from its slot's ``SshProxy``; ``proxy_command`` is the
OpenSSH ``ProxyCommand`` for the same route (``openssh.ssh_argv``, the tmux windows and
``tpu-reconciler ssh``): the hop's argv, each argument quoted for the shell OpenSSH runs it with
and every ``%`` doubled (OpenSSH expands ``%`` tokens before the shell sees the line); a jump is
``ssh -W HOST:PORT`` to the jump host with the same key, pins and no agent forwarding.

May: validate and build argument lists. May not: run anything, read files, import asyncssh.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.errors import SetupFailed, UnsafeName
from reconciler.model import names
from reconciler.model.ssh_proxy import JumpHost, SshProxy, check_argument, expand

GCLOUD: Final = "gcloud"
#: gcloud's own check of the instance it tunnels to (``_BuildIapTunnelProxyCommandArgs``):
#: letters, digits, ``-``, ``_``, ``.``; and never an option.
_VM_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


@dataclass(frozen=True, slots=True)
class CommandHop:
    """A program relaying stdin/stdout to the worker; ``label`` names it in messages."""

    argv: tuple[str, ...]
    label: str

    def __post_init__(self) -> None:
        if not self.argv or self.argv[0].startswith("-"):
            raise UnsafeName(f"invalid proxy command {self.argv!r}")
        for arg in self.argv:
            try:
                check_argument(arg.replace("%", "%%"))
            except ValueError as e:
                raise UnsafeName(f"invalid proxy command argument: {e}") from None


@dataclass(frozen=True, slots=True)
class JumpHop:
    """An SSH jump host; ``user`` logs in there (None: the workers' SSH user)."""

    host: str
    port: int
    user: str | None = None

    @property
    def label(self) -> str:
        return f"jump {self.user + '@' if self.user else ''}{self.host}:{self.port}"


Hop = CommandHop | JumpHop


def check_vm(name: object) -> str:
    """A worker VM name IAP may be asked for (gcloud's rule); UnsafeName otherwise."""
    if not isinstance(name, str) or not _VM_RE.fullmatch(name):
        raise UnsafeName(f"invalid VM name {name!r}: expected letters, digits, '.', '_', '-'")
    return name


def iap_argv(
    vm: str, port: int, *, zone: str, project: str, gcloud: str = GCLOUD
) -> tuple[str, ...]:
    """``gcloud compute start-iap-tunnel VM PORT --listen-on-stdin ...``, as gcloud's ssh
    builds it for a TPU VM worker (or a Compute Engine instance)."""
    return (
        gcloud,
        "compute",
        "start-iap-tunnel",
        check_vm(vm),
        str(_port(port)),
        "--listen-on-stdin",
        f"--project={names.check_project(project)}",
        f"--zone={names.check_zone(zone)}",
        "--verbosity=warning",
    )


def _port(port: object) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise UnsafeName(f"invalid port {port!r}")
    return port


def hop_for(
    proxy: SshProxy,
    *,
    host: str,
    port: int,
    node: str,
    vm: str | None = None,
    zone: str = "",
    project: str = "",
    gcloud: str = GCLOUD,
) -> Hop | None:
    """The hop to one worker (``host``:``port``, of node ``node``) for its slot's ``proxy``;
    None when it is dialled directly. ``vm`` is the worker's VM name (IAP only: SetupFailed
    when it is not known)."""
    if proxy.kind == "none":
        return None
    if proxy.kind == "iap":
        if not vm:
            raise SetupFailed(
                f"worker VM name of {node} not known: IAP tunnels to the VM by name", delay=30.0
            )
        return CommandHop(iap_argv(vm, port, zone=zone, project=project, gcloud=gcloud), "iap")
    if proxy.kind == "jump" and proxy.jump is not None:
        jump: JumpHost = proxy.jump
        return JumpHop(jump.host, jump.port, jump.user)
    values = {"h": host, "p": str(_port(port)), "n": names.check_name(node)}
    argv = tuple(expand(arg, values) for arg in proxy.command)
    return CommandHop(argv, f"proxy {Path(argv[0]).name}")


def jump_alias(hop: JumpHop) -> str:
    """The known_hosts name pinning a jump host's key: ``jump.<host>.p<port>`` (an IPv6
    address as its hex digits)."""
    host = hop.host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.version == 6:
        host = "ip6-" + address.packed.hex()
    return f"jump.{host}.p{_port(hop.port)}"


def proxy_command(
    hop: Hop,
    *,
    key: str,
    known_hosts: str,
    worker_host: str,
    worker_port: int,
    user: str | None,
    ssh: str = "ssh",
) -> str:
    """The value of OpenSSH's ``ProxyCommand`` reaching the worker through ``hop`` (``key`` and
    ``known_hosts`` already checked paths, and ``user`` the workers' (None: OpenSSH's
    default), used for a jump host)."""
    if isinstance(hop, JumpHop):
        target = f"[{worker_host}]" if ":" in worker_host else worker_host
        argv: tuple[str, ...] = (
            ssh,
            "-a",
            "-x",
            "-i",
            key,
            "-o",
            f"HostKeyAlias={jump_alias(hop)}",
            "-o",
            f"UserKnownHostsFile={known_hosts}",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "IdentitiesOnly=yes",
            "-p",
            str(hop.port),
            "-W",
            f"{target}:{_port(worker_port)}",
            f"{names.check_user(login)}@{hop.host}" if (login := hop.user or user) else hop.host,
        )
    else:
        argv = hop.argv
    return " ".join(shlex.quote(a) for a in argv).replace("%", "%%")
