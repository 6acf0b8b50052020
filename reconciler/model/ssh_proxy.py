"""How the controller reaches workers it cannot dial: ``ssh_proxy`` (settings, and per slot).

Written in desired.yaml as one of::

    ssh_proxy: iap                                    # IAP TCP forwarding, one tunnel a worker
    ssh_proxy: {jump: alice@bastion.example.com:2222} # an SSH jump host (OpenSSH's ProxyJump)
    ssh_proxy: {command: [nc, "%h", "%p"]}            # any program relaying stdin/stdout
    ssh_proxy: none                                   # dial directly (a slot overriding settings)

A command is an argument list, never a shell string; its arguments may use ``%h`` (the
worker's address, internal with ``settings.internal_ips``), ``%p`` (``settings.ssh_port``),
``%n`` (the node's name) and ``%%`` (a ``%``); any other ``%`` is an error, as in OpenSSH.

``SshProxy`` is the resolved value a slot carries (``SlotSpec.ssh_proxy``): its own key, else
its generator's, else ``settings.ssh_proxy``, else direct. ``expand`` fills the tokens in.

Pure: values and checks (``ValueError`` with the reason), nothing dials.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from reconciler.errors import UnsafeName
from reconciler.model.names import check_user

Kind = Literal["none", "iap", "jump", "command"]

#: The tokens a proxy command may use, and what each stands for.
TOKENS: Final = {"h": "the worker's address", "p": "the SSH port", "n": "the node's name"}
MAX_ARGS: Final = 64
MAX_ARG_LENGTH: Final = 1024
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_PERCENT: Final = re.compile(r"%(.?)", re.S)
#: A DNS name (RFC 1123 labels), compared in lowercase.
_HOST_RE: Final = re.compile(
    r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
)
_JUMP_RE: Final = re.compile(
    r"^(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:@\[\]]+)(?::(?P<port>[^:]*))?$"
)


@dataclass(frozen=True, slots=True)
class JumpHost:
    """An SSH jump host: ``user`` None logs in as the workers' SSH user."""

    host: str
    port: int = 22
    user: str | None = None

    @property
    def text(self) -> str:
        """``user@host:port`` (an IPv6 address in brackets), as written back."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user + '@' if self.user else ''}{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class SshProxy:
    """A slot's way to its workers: ``kind`` none (dial them), iap, jump or command."""

    kind: Kind = "none"
    jump: JumpHost | None = None
    command: tuple[str, ...] = ()

    @property
    def direct(self) -> bool:
        return self.kind == "none"

    @property
    def text(self) -> str:
        """One line for people: ``iap``, ``jump alice@bastion:22``, ``command nc %h %p``."""
        if self.kind == "jump" and self.jump is not None:
            return f"jump {self.jump.text}"
        if self.kind == "command":
            return "command " + " ".join(self.command)
        return self.kind

    def as_yaml(self) -> str | dict[str, object]:
        """As desired.yaml would write it (``validate --resolved``)."""
        if self.kind == "jump" and self.jump is not None:
            return {"jump": self.jump.text}
        if self.kind == "command":
            return {"command": list(self.command)}
        return self.kind


DIRECT: Final = SshProxy()


def parse_jump(text: object) -> JumpHost:
    """``[user@]host[:port]`` -> JumpHost; ValueError saying what is wrong. The host is a DNS
    name or an IP address (IPv6 in brackets); nothing in it can start an option."""
    if not isinstance(text, str) or not text or _CONTROL.search(text) or " " in text:
        raise ValueError("expected user@host or user@host:port")
    match = _JUMP_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not user@host[:port] (an IPv6 address goes in brackets)")
    user = match["user"]
    if user is not None:
        try:
            check_user(user)
        except UnsafeName:
            raise ValueError(f"{user!r} is not a user name (expected a POSIX user name)") from None
    host = match["host"]
    if host.startswith("["):
        try:
            host = str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            raise ValueError(f"{host} is not an IPv6 address") from None
    else:
        host = host.lower().rstrip(".")
        try:
            host = str(ipaddress.IPv4Address(host))
        except ValueError:
            if not _HOST_RE.fullmatch(host):
                raise ValueError(f"{match['host']!r} is not a host name or IP address") from None
    port_text = match["port"]
    port = 22
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
        port = int(port_text)
    return JumpHost(host, port, user)


def check_argument(arg: object) -> str:
    """One argument of a proxy command: text without control characters, whose ``%`` are
    tokens it knows. ValueError otherwise."""
    if not isinstance(arg, str) or not arg:
        raise ValueError("every argument must be a non-empty string")
    if len(arg) > MAX_ARG_LENGTH:
        raise ValueError(f"an argument is longer than {MAX_ARG_LENGTH} characters")
    if _CONTROL.search(arg):
        raise ValueError(f"{arg!r} contains a control character")
    for token in _PERCENT.findall(arg):
        if token != "%" and token not in TOKENS:
            shown = f"%{token}" if token else "a lone %"
            raise ValueError(
                f"{arg!r}: {shown} is not a token (use %h, %p, %n, or %% for a literal %)"
            )
    return arg


def check_command(argv: Sequence[object]) -> tuple[str, ...]:
    """A whole proxy command: 1-64 arguments, each ``check_argument``; the program neither a
    token nor an option, and somewhere a ``%h`` or ``%n`` (else every worker would be
    reached at one place). ValueError otherwise."""
    if isinstance(argv, str) or not argv:
        raise ValueError("expected a list of arguments, the program first")
    if len(argv) > MAX_ARGS:
        raise ValueError(f"more than {MAX_ARGS} arguments")
    out = tuple(check_argument(a) for a in argv)
    program = out[0]
    if program.startswith("-") or "%" in program:
        raise ValueError(f"the program {program!r} may not start with '-' or hold a token")
    if not any(re.search(r"%[hn]", a.replace("%%", "")) for a in out[1:]):
        raise ValueError(
            "the command must name the worker: put %h (its address) or %n (the node's name) "
            "in an argument"
        )
    return out


def expand(arg: str, values: Mapping[str, str]) -> str:
    """``arg`` with ``%h``/``%p``/``%n`` replaced from ``values`` and ``%%`` made ``%``."""

    def one(match: re.Match[str]) -> str:
        token = match.group(1)
        if token == "%":
            return "%"
        if token not in values:
            raise ValueError(f"unknown token %{token}")
        return values[token]

    return _PERCENT.sub(one, arg)


def resolve_proxy(*layers: object) -> SshProxy:
    """The first layer that says anything (a slot's key, a generator's, the settings'),
    as an ``SshProxy``; each layer is None or a schema value with ``iap``, ``jump`` and
    ``command`` attributes (``model.desired_proxy.SshProxyModel``)."""
    for layer in layers:
        if layer is None:
            continue
        if getattr(layer, "iap", False):
            return SshProxy("iap")
        jump = getattr(layer, "jump", None)
        if jump:
            return SshProxy("jump", jump=parse_jump(jump))
        command = getattr(layer, "command", None)
        if command:
            return SshProxy("command", command=tuple(command))
        return DIRECT  # written, and says none
    return DIRECT
