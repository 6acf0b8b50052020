"""The shared fixtures unit tests use: ``make_emulator``, for the tests of the emulator
itself (in-process, loopback only), and ``ce``, its Compute Engine side with every exchange
decoded by the SDK. Everything else here is pure and needs no fixture."""

from tests.fixtures.compute import ce
from tests.fixtures.emulator import make_emulator

__all__ = ["ce", "make_emulator"]
