"""Host key pins: first use, mismatch, forget, concurrency, and OpenSSH reading the same file."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from reconciler.adapters.hostkeys import HostKey, HostKeyStore
from reconciler.errors import HostKeyMismatch, UnsafeName
from reconciler.model.names import host_key_alias
from tests.support.tools import require_tool


def _key(seed: int) -> HostKey:
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes([seed]) * 32
    return HostKey("ssh-ed25519", base64.b64encode(blob).decode())


A = host_key_alias("node-a@111", 0)
A1 = host_key_alias("node-a@111", 1)
B = host_key_alias("node-b@222", 0)


def test_first_use_pins_and_a_changed_key_is_refused(tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "state" / "known_hosts")
    assert store.verify(A, _key(1)) is False  # nothing pinned, nothing written
    assert not store.path.exists()

    assert store.check_or_pin(A, _key(1)) is False
    assert store.check_or_pin(A, _key(1)) is True
    assert store.verify(A, _key(1)) is True
    assert store.path.read_text() == f"{A} ssh-ed25519 {_key(1).base64}\n"
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600

    with pytest.raises(HostKeyMismatch) as raised:
        store.check_or_pin(A, _key(2), what="worker 0 of node-a@111 (10.0.0.2:22)")
    message = str(raised.value)
    assert "worker 0 of node-a@111" in message and A in message
    assert _key(1).fingerprint in message and _key(2).fingerprint in message
    assert store.pinned(A) == (_key(1),)  # unchanged
    assert store.check_or_pin(A1, _key(2)) is False  # another worker is another alias


def test_unreadable_entry_counts_as_a_pin(tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "known_hosts")
    store.path.write_text(f"{A} ssh-ed25519 !!!not-base64!!!\n")
    with pytest.raises(HostKeyMismatch, match="unreadable"):
        store.check_or_pin(A, _key(1))


def test_forget_drops_one_instance_and_keeps_everything_else(tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "known_hosts")
    foreign = f"github.com ssh-ed25519 {_key(9).base64}"
    store.path.write_text(f"# my notes\n{foreign}\n")
    for alias, seed in ((A, 1), (A1, 2), (B, 3)):
        store.check_or_pin(alias, _key(seed))

    assert store.forget("node-a@111") == 2
    assert store.aliases() == (B,)
    assert store.path.read_text().startswith(f"# my notes\n{foreign}\n")
    assert store.forget("node-a@111") == 0


def test_openssh_finds_and_hashes_the_same_pins(tmp_path: Path) -> None:
    keygen = require_tool("ssh-keygen")
    store = HostKeyStore(tmp_path / "known_hosts")
    store.check_or_pin(A, _key(1))
    store.check_or_pin(B, _key(3))
    found = subprocess.run(
        [keygen, "-F", A, "-f", str(store.path)], capture_output=True, text=True, check=True
    )
    assert _key(1).base64 in found.stdout

    # HashKnownHosts: OpenSSH rewrites the lines as |1|salt|hash; the pins still hold
    subprocess.run([keygen, "-H", "-f", str(store.path)], capture_output=True, check=True)
    assert A not in store.path.read_text()
    assert store.verify(A, _key(1)) is True
    with pytest.raises(HostKeyMismatch):
        store.verify(A, _key(2))
    assert store.forget("node-a@111") == 1
    assert store.pinned(A) == () and store.verify(B, _key(3)) is True


def test_concurrent_first_uses_all_survive(tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "known_hosts")
    aliases = [host_key_alias("big-node@9", i) for i in range(32)]
    barrier = threading.Barrier(len(aliases))

    def pin(i: int) -> None:
        barrier.wait()
        HostKeyStore(store.path).check_or_pin(aliases[i], _key(i))

    threads = [threading.Thread(target=pin, args=(i,)) for i in range(len(aliases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(store.aliases()) == sorted(aliases)


def test_concurrent_processes_do_not_lose_pins(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    code = (
        "import sys, base64\n"
        "from pathlib import Path\n"
        "from reconciler.adapters.hostkeys import HostKey, HostKeyStore\n"
        "from reconciler.model.names import host_key_alias\n"
        "p, k = int(sys.argv[1]), Path(sys.argv[2])\n"
        "for i in range(10):\n"
        "    blob = bytes([p, i]) * 16\n"
        "    key = HostKey('ssh-ed25519', base64.b64encode(blob).decode())\n"
        "    HostKeyStore(k).check_or_pin(host_key_alias(f'n{p}@1', i), key)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(p), str(path)], env=env) for p in range(3)
    ]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    assert len(HostKeyStore(path).aliases()) == 30


def test_names_are_validated(tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "known_hosts")
    with pytest.raises(UnsafeName):
        store.pinned("evil host")
    with pytest.raises(UnsafeName):
        HostKey("ssh-ed25519", "AAAA\nother line")
