"""The one shared fixture unit tests use: ``make_emulator``, for the tests of the emulator
itself (in-process, loopback only). Everything else here is pure and needs no fixture."""

from tests.fixtures.emulator import make_emulator

__all__ = ["make_emulator"]
