"""The addresses the emulator hands out: one pool shared by both APIs it serves.

Pure bookkeeping (no sockets): a Cloud TPU node's external IPs and a Compute Engine
instance's ``networkIP`` / ``natIP`` come from the same pool, lowest free address first, so a
TPU worker and an instance never share an address while the pool lasts (tests point it at
``127.0.0.x``, where each address has its own sshd). When the pool runs out, addresses are
shared round-robin. Internal TPU addresses (``10.128.x.y``) are counted here too.
"""

from __future__ import annotations

from collections.abc import Iterable


class AddressPool:
    def __init__(self, pool: tuple[str, ...]) -> None:
        self.pool = pool
        self._in_use: set[str] = set()
        self._round_robin = 0
        self._internal = 0

    def take(self) -> str:
        """The lowest pool address no one holds (round-robin once the pool is exhausted)."""
        for ip in self.pool:
            if ip not in self._in_use:
                self._in_use.add(ip)
                return ip
        self._round_robin += 1
        return self.pool[(self._round_robin - 1) % len(self.pool)]

    def release(self, ips: Iterable[str | None]) -> None:
        self._in_use.difference_update(ip for ip in ips if ip)

    def internal(self) -> str:
        """A fresh private address, ``10.128.0.3`` onwards, never from the pool."""
        self._internal += 1
        n = self._internal
        return f"10.{128 + n // 62500 % 64}.{n // 250 % 250}.{n % 250 + 2}"
