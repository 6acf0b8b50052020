"""VM bootstrap over SSH: the public surface (values, script resolution, ``bootstrap``).

``bootstrap(instance, workers, scripts, log_dir, opts)`` connects to every worker of one node
with asyncssh, one task per worker, uploads the scripts by SFTP to a fresh private directory
(``~/.tpu-reconciler/run-<random>/``, 0700) and runs them in order, each as
``TPU_RECONCILER_WORKER=<index> exec <script>`` from the login directory (a shebang is
honoured; a script without one runs under ``/bin/sh``). Stdout and stderr of each worker go to
its own log ``<log_dir>/worker-<index>.log`` (0600, appended, one header per run); the result
says per worker ok / failed with exit status, the last ``TAIL_LINES`` lines and the error.
The first script that fails stops that worker; the other workers go on.

Concurrency: ``opts.concurrency`` bounds how many workers are *connecting and uploading* at
once (the CPU-heavy part); a connected worker then runs its scripts without holding a place,
so a 64-host slice runs its 30-minute scripts side by side instead of in waves.
``gather(return_exceptions=True)`` keeps one bad worker from cancelling the rest.

Nothing is read implicitly: no ``~/.ssh/config``, no user known_hosts, no ambient
``SSH_AUTH_SOCK``, no default identities. The caller passes the user (``settings.ssh_user`` or
``oslogin.resolve_user``), the key (default ``~/.ssh/google_compute_engine``), the agent socket
(``agent_path``; forwarding is on exactly when one is given) and the ``HostKeyStore``; host
keys are pinned per node instance and worker (see ``hostkeys``), never left unchecked.

An address from a documentation range (an emulated node's) is refused before anything dials
(``check_dialable`` raises ``NoMachine``): no machine stands behind it.

Script paths come from ``resolve_scripts``: relative paths are taken from the desired file's
directory and may not leave it (``../x`` or a symlink out is ``UnsafeName``), absolute paths are
taken as written. Both refuse before anything connects.

May: read the scripts, write worker logs, talk SSH/SFTP to the given workers. May not: keep
state between calls (the controller records success per node instance), print, or let an
asyncssh / OS exception escape (they become ``SetupFailed`` or ``HostKeyMismatch``).
asyncssh itself is imported only when ``bootstrap`` runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from reconciler.adapters.ssh_values import (
    DEFAULT_KEY,
    TAIL_LINES,
    SetupResult,
    SshOptions,
    Worker,
    WorkerResult,
    check_dialable,
    workers_of,
)
from reconciler.errors import SetupFailed, UnsafeName
from reconciler.model.names import check_name, host_key_alias

__all__ = [
    "DEFAULT_KEY",
    "TAIL_LINES",
    "SetupResult",
    "SshOptions",
    "Worker",
    "WorkerResult",
    "bootstrap",
    "check_dialable",
    "instance_tag",
    "log_dir_for",
    "remote_script_name",
    "resolve_scripts",
    "workers_of",
]


def resolve_scripts(base_dir: Path, paths: Sequence[str]) -> tuple[Path, ...]:
    """Script paths as the desired file gives them, made absolute.

    Relative paths are resolved against ``base_dir`` (the desired file's directory), following
    symlinks, and must stay inside it: ``../x`` or a link pointing out raises UnsafeName.
    Absolute paths are taken as the user wrote them. A path that is missing or not a regular
    file raises SetupFailed (the user may still create it). Nothing connects before this.
    """
    base = Path(base_dir).resolve()
    out: list[Path] = []
    for raw in paths:
        if not isinstance(raw, str) or not raw.strip() or "\0" in raw:
            raise UnsafeName(f"invalid script path {raw!r}")
        given = Path(raw).expanduser() if raw.startswith("~") else Path(raw)
        if given.is_absolute():
            path = given
        else:
            path = (base / given).resolve()
            if not path.is_relative_to(base):
                raise UnsafeName(
                    f"script {raw!r} resolves to {path}, outside {base}: a relative script path "
                    "must stay in the desired file's directory (write an absolute path to use "
                    "a script elsewhere)"
                )
        if not path.is_file():
            raise SetupFailed(f"script {raw!r} not found or not a regular file ({path})")
        out.append(path)
    return tuple(out)


def instance_tag(instance: str) -> str:
    """A file-name-safe tag for a node instance: ``node@123`` -> ``node.123``."""
    return host_key_alias(instance, 0).removeprefix("tpu.").removesuffix(".w0")


def log_dir_for(logs_root: Path, slot: str, instance: str) -> Path:
    """``<state dir>/logs/<slot>/<instance tag>`` (``logs_root`` is ``StateDir.logs``)."""
    return Path(logs_root) / check_name(slot) / instance_tag(instance)


_SAFE_FILE_RE: Final = re.compile(r"[^A-Za-z0-9._-]")


def remote_script_name(position: int, path: Path) -> str:
    """``01-setup.sh``: the order prefix keeps names unique and the order visible."""
    stem = _SAFE_FILE_RE.sub("_", path.name)[:80] or "script"
    return f"{position:02d}-{stem}"


async def bootstrap(
    instance: str,
    workers: Sequence[Worker],
    scripts: Sequence[Path],
    log_dir: Path,
    opts: SshOptions,
) -> SetupResult:
    """Run ``scripts`` (from ``resolve_scripts``) in order on every worker of ``instance``.

    Raises SetupFailed only when a script or the SSH key cannot be read, NoMachine for
    an emulated node's address (both before any connection); every per-worker problem is in
    the result (see ``SetupResult.raise_for_failure``).
    """
    from reconciler.adapters import ssh_run  # asyncssh is imported only when needed

    host_key_alias(instance, 0)  # validates the instance before anything connects
    check_dialable(instance.partition("@")[0], (w.host for w in workers))
    payloads = script_payloads(scripts)
    return await ssh_run.bootstrap(instance, tuple(workers), payloads, log_dir, opts)


def script_payloads(scripts: Sequence[Path]) -> tuple[tuple[str, bytes], ...]:
    """``scripts`` (from ``resolve_scripts``) as they are uploaded: ``(01-name, content)``
    each, in order; SetupFailed for one that cannot be read."""
    payloads: list[tuple[str, bytes]] = []
    for position, path in enumerate(scripts, start=1):
        try:
            payloads.append((remote_script_name(position, path), Path(path).read_bytes()))
        except OSError as exc:
            raise SetupFailed(f"cannot read script {path}: {exc.strerror or exc}") from None
    return tuple(payloads)
