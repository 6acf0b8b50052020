"""The round trip to a node: how long a TCP connect to its SSH port takes.

``status`` shows it per zone (``core/latency`` decides which node to probe and when;
``runtime/latency`` runs the probe beside the controller's pass). A connect is a plain TCP
handshake, closed at once: no SSH is spoken, no credentials are used.

May: open (and close at once) one TCP connection to the address given.
May not: raise for a network failure (a refused, unreachable or slow address is *unknown*:
None), dial a documentation address (the emulator's nodes: no machine stands behind them, so
it answers None without a connect), or resolve host names (callers pass IP addresses).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from typing import Final

from reconciler.model.addresses import is_documentation_address

CONNECT_TIMEOUT: Final = 2.0  # seconds: a round trip longer than this is not worth showing
_CLOSE_TIMEOUT: Final = 1.0


async def connect_time(ip: str, port: int, timeout: float = CONNECT_TIMEOUT) -> float | None:
    """Seconds a TCP connect to ``ip:port`` took, or None when it failed, timed out, or
    ``ip`` is not an IP address or is one no machine stands behind."""
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return None  # a host name would need a DNS lookup first: not a round trip
    if is_documentation_address(ip):
        return None
    start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(ip, port)
    except (OSError, TimeoutError):
        return None
    elapsed = time.perf_counter() - start
    writer.close()
    with contextlib.suppress(OSError, TimeoutError):
        async with asyncio.timeout(_CLOSE_TIMEOUT):
            await writer.wait_closed()
    return elapsed
