"""Where tpu-reconciler keeps its state, and the name of every file in it.

One state directory per desired file (``--state-dir``, ``$TPU_RECONCILER_STATE_DIR``, or
``$XDG_STATE_HOME/tpu-reconciler/<file-stem>-<hash of its absolute path>``), 0700, holding:

    controller.lock      flock held by the running controller; contains its pid
    status.json          snapshot written after every pass (schema tpu-reconciler.status.v1)
    events.jsonl         append-only event log (transitions, actions, results, errors)
    memory.json          controller memory: backoff, setup records, notices sent
    audit.jsonl          append-only record of every intent edit (source, user, operation id,
                         diff) and of every intent the controller loaded (file owner)
    confirm.json         a confirmation of the deletes the delete guard holds
    intent.lock          flock serialising intent edits from MCP and CLI
    operations.json      MCP/CLI operation ids and their results (idempotent replays)
    known_hosts          SSH host keys pinned per node instance and worker
    oslogin_user         cached OS Login user name
    worker_names.json    each IAP-reached node's worker VM names (adapters/worker_names)
    history.sqlite       capacity history (SQLite, WAL): transitions, waits, lifetimes, races
    secrets/             0700; one 0600 file per secret (e.g. ``tailscale``)
    logs/                per-slot, per-node-instance, per-worker setup logs

A shared lab's state directory (``service install --shared``, ``adapters/lab_layout``) is the
group's, setgid and sticky (3770), and keeps what the controller trusts apart, in
``controller/`` (2750: only the controller's user creates, renames, links or writes there;
members read): the lock, status, events, memory, host keys, OS Login cache, history, setup
logs, the intent lock, the confirmation it acts on and its own audit record. Beside it stay
what members write — ``audit.jsonl`` (their edits), ``operations.<user>.json`` (each their own),
``inbox/`` (3730: a member's confirmation request, theirs by the kernel's word) — and
``policy.yaml`` and ``secrets/``. The layout is decided by ``controller/`` existing: a one-user
directory never has one, so its files stay where they always were.
"""

from __future__ import annotations

import os
import stat
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


#: The controller-private directory of a shared lab's state directory (``adapters/lab_layout``).
PRIVATE_NAME = "controller"
INBOX_NAME = "inbox"


@dataclass(frozen=True)
class StateDir:
    root: Path

    def ensure(self) -> StateDir:
        ensure_private_dir(self.root)
        return self

    @property
    def private(self) -> Path:
        """Where the controller's own files live: ``controller/`` in a shared lab's state
        directory (a real directory, never a symbolic link), else the directory itself."""
        candidate = self.root / PRIVATE_NAME
        try:
            if stat.S_ISDIR(candidate.lstat().st_mode):
                return candidate
        except OSError:
            pass
        return self.root

    @property
    def lab(self) -> bool:
        """Whether this is a shared lab's layout (``controller/`` and ``inbox/``)."""
        return self.private != self.root

    @property
    def inbox(self) -> Path:
        """Members' requests to the controller (a lab's only: see the module docstring)."""
        return self.root / INBOX_NAME

    @property
    def lock(self) -> Path:
        return self.private / "controller.lock"

    @property
    def status(self) -> Path:
        return self.private / "status.json"

    @property
    def events(self) -> Path:
        return self.private / "events.jsonl"

    @property
    def memory(self) -> Path:
        return self.private / "memory.json"

    @property
    def audit(self) -> Path:
        """The intent edits' record (every member's tool edits append to it)."""
        return self.root / "audit.jsonl"

    @property
    def controller_audit(self) -> Path:
        """The controller's own record (loads, confirmations it acted on): the same file as
        ``audit`` in one user's directory, ``controller/audit.jsonl`` in a lab's."""
        return self.private / "audit.jsonl"

    @property
    def confirm(self) -> Path:
        """The confirmation the controller acts on (``adapters/confirm_file``)."""
        return self.private / "confirm.json"

    @property
    def intent_lock(self) -> Path:
        return self.private / "intent.lock"

    @property
    def operations(self) -> Path:
        """One user's directory's operation ids (``operations_of`` in a lab)."""
        return self.root / "operations.json"

    def operations_of(self, user: str) -> Path:
        """``user``'s operation ids: one file for a one-user directory, one per member in a
        lab's (each writes only their own)."""
        return self.root / f"operations.{user}.json" if self.lab else self.operations

    @property
    def known_hosts(self) -> Path:
        return self.private / "known_hosts"

    @property
    def oslogin_user(self) -> Path:
        return self.private / "oslogin_user"

    @property
    def worker_names(self) -> Path:
        return self.root / "worker_names.json"

    @property
    def secrets(self) -> Path:
        return ensure_private_dir(self.root / "secrets")

    @property
    def logs(self) -> Path:
        return ensure_private_dir(self.private / "logs")

    @property
    def history(self) -> Path:
        return self.private / "history.sqlite"


def ensure_private_dir(path: Path) -> Path:
    """``adapters.files.ensure_private_dir``, imported on first use: reading the state dir
    (``status``) must not pay for the file-writing primitives."""
    from reconciler.adapters.files import ensure_private_dir as ensure

    return ensure(path)
