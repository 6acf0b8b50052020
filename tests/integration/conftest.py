"""The fixtures the integration tests use: each a real part (emulator, controller, sshd workers,
tmux), defined in ``tests/fixtures/`` and made visible to this folder only by naming it here.
A fixture module added for these tests is imported here too."""

from tests.fixtures.controller import fast_emulator, harness, running
from tests.fixtures.emulator import emulator, gcloud_env, make_emulator
from tests.fixtures.hidden import hidden_world
from tests.fixtures.setup_world import cloud_world, ntfy_server, setup_world
from tests.fixtures.sshd import ssh_client, sshd_cluster
from tests.fixtures.tmux import tmux_mirror, tmux_server, tmux_socket

__all__ = [
    "cloud_world",
    "emulator",
    "fast_emulator",
    "gcloud_env",
    "harness",
    "hidden_world",
    "make_emulator",
    "ntfy_server",
    "running",
    "setup_world",
    "ssh_client",
    "sshd_cluster",
    "tmux_mirror",
    "tmux_server",
    "tmux_socket",
]
