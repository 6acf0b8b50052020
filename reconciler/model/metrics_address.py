"""Where the controller serves its Prometheus metrics: ``settings.metrics``, as a value.

The rule (docs/operations.md, "Metrics"):

- off by default (the key absent or ``null``);
- a port alone (``9464`` or ``"9464"``) or ``localhost:PORT`` serves on ``127.0.0.1`` — the
  loopback interface, never every interface;
- ``HOST:PORT`` with an IP literal (``127.0.0.1:9464``, ``[::1]:9464``) serves there; an IP
  that is not loopback (``0.0.0.0:9464``, ``10.0.0.5:9464``, ``[::]:9464``) is accepted only
  written so, as an IP literal: that is the explicit word that other machines may scrape;
- a host name other than ``localhost`` is refused (what it resolves to is not written in the
  file), and so is an empty host (``:9464``, which many tools read as "every interface");
- port 0 takes any free port (the ``metrics.serving`` event names the one bound).

May: parse and check values. May not: do I/O (no name resolution, no socket).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final

LOOPBACK: Final = "127.0.0.1"
_HOST_PORT: Final = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\[\]:]*)):(?P<port>\d+)$"
)


@dataclass(frozen=True, slots=True)
class MetricsAddress:
    """A checked address: ``host`` an IP literal, ``port`` 0..65535."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range (0..65535)")
    return port


def parse_metrics_address(value: object) -> MetricsAddress:
    """``value`` as written in ``settings.metrics``; ValueError saying what is wrong."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("expected a port (9464) or HOST:PORT (127.0.0.1:9464)")
    text = str(value).strip()
    if text.isdigit():
        return MetricsAddress(LOOPBACK, _port(text))
    m = _HOST_PORT.fullmatch(text)
    if m is None:
        raise ValueError(
            f"{text!r}: expected a port (9464) or HOST:PORT (127.0.0.1:9464, [::1]:9464)"
        )
    port = _port(m.group("port"))
    host = m.group("v6") if m.group("v6") is not None else m.group("host")
    if host == "localhost":
        return MetricsAddress(LOOPBACK, port)
    if not host:
        raise ValueError(
            f"{text!r}: an empty host would serve on every interface; write 127.0.0.1:{port} "
            f"(this machine only) or 0.0.0.0:{port} (every interface, on purpose)"
        )
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{text!r}: {host!r} is a host name; write an IP address (127.0.0.1 for this "
            "machine only; another address only when other machines should scrape it)"
        ) from None
    if (m.group("v6") is None) != (ip.version == 4):
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, [{host}]:{port}")
    return MetricsAddress(str(ip), port)
