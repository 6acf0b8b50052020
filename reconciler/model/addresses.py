"""Addresses that no machine answers.

RFC 5737 sets aside three IPv4 blocks (and RFC 3849 one IPv6 block) for documentation: no
host on any network uses them. The emulator gives its nodes addresses from these blocks, so
anything about to dial a node (SSH, logs, tmux, setup) can tell at once that no machine stands
behind it, instead of connecting and waiting for a timeout.

Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from typing import Final

DOCUMENTATION_NETWORKS: Final = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


def is_documentation_address(address: str) -> bool:
    """True when ``address`` is an IP of a documentation range (not a host name, not invalid)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == n.version and ip in n for n in DOCUMENTATION_NETWORKS)
