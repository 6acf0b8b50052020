"""Where tpu-reconciler keeps its state, and the name of every file in it.

One state directory per desired file (``--state-dir``, ``$TPU_RECONCILER_STATE_DIR``, or
``$XDG_STATE_HOME/tpu-reconciler/<file-stem>-<hash of its absolute path>``), 0700 (a shared
lab's: 2770, its group's; ``adapters/lab``), holding:

    controller.lock      flock held by the running controller; contains its pid
    status.json          snapshot written after every pass (schema tpu-reconciler.status.v1)
    events.jsonl         append-only event log (transitions, actions, results, errors)
    memory.json          controller memory: backoff, setup records, notices sent
    audit.jsonl          append-only record of every intent edit (source, user, operation id,
                         diff) and of every intent the controller loaded (file owner)
    policy.yaml          a shared lab's policy (``adapters/lab``), owned by the controller's user
    intent.lock          flock serialising intent edits from MCP and CLI
    operations.json      MCP/CLI operation ids and their results (idempotent replays)
    known_hosts          SSH host keys pinned per node instance and worker
    oslogin_user         cached OS Login user name
    worker_names.json    each IAP-reached node's worker VM names (adapters/worker_names)
    history.sqlite       capacity history (SQLite, WAL): transitions, waits, lifetimes, races
    secrets/             0700; one 0600 file per secret (e.g. ``tailscale``)
    logs/                per-slot, per-node-instance, per-worker setup logs
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def default_state_dir(desired_file: Path, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get("TPU_RECONCILER_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    absolute = desired_file.expanduser().resolve()
    import hashlib  # here: `status` with --state-dir never needs it (OpenSSL is slow to load)

    tag = hashlib.sha256(str(absolute).encode()).hexdigest()[:8]
    return base / "tpu-reconciler" / f"{absolute.stem}-{tag}"


@dataclass(frozen=True)
class StateDir:
    root: Path

    def ensure(self) -> StateDir:
        ensure_private_dir(self.root)
        return self

    @property
    def lock(self) -> Path:
        return self.root / "controller.lock"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def memory(self) -> Path:
        return self.root / "memory.json"

    @property
    def audit(self) -> Path:
        return self.root / "audit.jsonl"

    @property
    def intent_lock(self) -> Path:
        return self.root / "intent.lock"

    @property
    def operations(self) -> Path:
        return self.root / "operations.json"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def oslogin_user(self) -> Path:
        return self.root / "oslogin_user"

    @property
    def worker_names(self) -> Path:
        return self.root / "worker_names.json"

    @property
    def secrets(self) -> Path:
        return ensure_private_dir(self.root / "secrets")

    @property
    def logs(self) -> Path:
        return ensure_private_dir(self.root / "logs")

    @property
    def history(self) -> Path:
        return self.root / "history.sqlite"


def ensure_private_dir(path: Path) -> Path:
    """``adapters.files.ensure_private_dir``, imported on first use: reading the state dir
    (``status``) must not pay for the file-writing primitives."""
    from reconciler.adapters.files import ensure_private_dir as ensure

    return ensure(path)
