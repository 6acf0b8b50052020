"""The shared fixtures the reliability tests use (defined in ``tests/fixtures/``)."""

from tests.fixtures.sshd import ssh_client

__all__ = ["ssh_client"]
