"""Every exception tpu-reconciler raises, in one place.

Foreign exceptions (subprocess failures, httpx, asyncssh, libtmux, pydantic) are translated into
these at the edge that meets them; nothing above the adapters catches a foreign exception.

Errors carry *retry intent*, the way kopf's do: a ``TemporaryError`` says "try again after
``delay`` seconds", a ``PermanentError`` says "retrying will not help until the intent or the
world changes". The controller reads only that intent, never the message, to decide what to do.

    ReconcilerError
    ├── TemporaryError(delay)            retry after a delay
    │   ├── TransientCloudError          429, UNAVAILABLE, RESOURCE_EXHAUSTED, timeouts, bad output
    │   ├── SetupFailed                  a bootstrap / tailscale step failed on a worker
    │   └── EditConflict                 desired.yaml changed under an edit, retries ran out
    ├── PermanentError                   retrying will not help
    │   ├── PermanentCloudError          PERMISSION_DENIED, INVALID_ARGUMENT, closed queue
    │   ├── HostKeyMismatch              a worker's SSH host key changed for the same node
    │   ├── UnsafeName                   a name that must never reach a subprocess
    │   ├── ControllerAlreadyRunning     a second controller for the same desired file
    │   └── EditRejected                 an intent edit that would make desired.yaml invalid
    ├── InvalidDesiredState              desired.yaml does not validate (diagnostics attached)
    └── StatusUnreadable                 status.json exists but is corrupt or of another schema

``CloudError`` is a mixin shared by both cloud error classes so callers can catch "anything the
cloud said" in one clause and still read its retry intent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class ReconcilerError(Exception):
    """Base of every error this package raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TemporaryError(ReconcilerError):
    """Retry after ``delay`` seconds (a suggestion; the caller's backoff may lengthen it)."""

    def __init__(self, message: str, *, delay: float = 10.0) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(ReconcilerError):
    """Retrying will not help until the intent or the world changes."""


class CloudError(ReconcilerError):
    """Something the cloud (or the CLI in front of it) refused or failed to answer.

    ``status`` is Google's canonical status name when known (``PERMISSION_DENIED``), ``code``
    its HTTP or gRPC code, and ``message`` the cloud's own words, kept for the user.
    """

    status: str | None = None
    code: int | None = None


class TransientCloudError(CloudError, TemporaryError):
    def __init__(
        self,
        message: str,
        *,
        delay: float = 10.0,
        status: str | None = None,
        code: int | None = None,
    ) -> None:
        TemporaryError.__init__(self, message, delay=delay)
        self.status = status
        self.code = code


class PermanentCloudError(CloudError, PermanentError):
    def __init__(self, message: str, *, status: str | None = None, code: int | None = None) -> None:
        PermanentError.__init__(self, message)
        self.status = status
        self.code = code


class SetupFailed(TemporaryError):
    """A setup step (bootstrap script, tailscale join) failed; ``worker`` says where."""

    def __init__(
        self, message: str, *, worker: int | None = None, log_tail: str = "", delay: float = 30.0
    ) -> None:
        super().__init__(message, delay=delay)
        self.worker = worker
        self.log_tail = log_tail


class HostKeyMismatch(PermanentError):
    """A worker presented a different host key than the one pinned for this node instance."""


class UnsafeName(PermanentError):
    """A name that failed validation and must not reach gcloud, SSH or tmux."""


class ControllerAlreadyRunning(PermanentError):
    def __init__(self, message: str, *, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class EditConflict(TemporaryError):
    """desired.yaml kept changing under an intent edit; nothing was written."""


class EditRejected(PermanentError):
    """An intent edit was refused (unknown slot, invalid result, op-id reuse); nothing written."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem in desired.yaml, at a 1-based line and column."""

    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class InvalidDesiredState(ReconcilerError):
    """desired.yaml failed to parse or validate. Nothing may be planned from it."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics) or "invalid desired state")


class StatusUnreadable(ReconcilerError):
    """The status snapshot exists but cannot be used (corrupt, unknown schema, wrong shape):
    reported, never taken for "no snapshot"."""

    def __init__(self, path: object, why: str) -> None:
        super().__init__(f"status snapshot {path} is unreadable: {why}")
        self.path = path
        self.why = why
