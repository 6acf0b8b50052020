"""Every exception tpu-reconciler raises, in one place.

Foreign exceptions (subprocess failures, httpx, asyncssh, libtmux, pydantic) are translated into
these at the edge that meets them; nothing above the adapters catches a foreign exception.

Errors carry *retry intent*, the way kopf's do: a ``TemporaryError`` says "try again after
``delay`` seconds", a ``PermanentError`` says "retrying will not help until the intent or the
world changes". The controller reads only that intent, never the message, to decide what to do.

Errors also carry the *exit code* a command returns for them (``exit_code``, names from
``exitcodes``): a surface that reports an error and stops returns ``e.exit_code``.

    ReconcilerError                          exit 1 (EX_REFUSED) unless a class says otherwise
    ├── TemporaryError(delay)            retry after a delay              exit 75 (EX_TEMPFAIL)
    │   ├── TransientCloudError          429, UNAVAILABLE, RESOURCE_EXHAUSTED, timeouts, bad output
    │   ├── OperationPending             the last create/delete's operation is still running
    │   ├── SetupFailed                  a bootstrap / tailscale step failed (worker, log_tail)
    │   │   └── RemoteCommandFailed      a remote command exited non-zero (exit_status)
    │   ├── WorkloadError                launch / stop / logs of a workload failed on a worker
    │   └── EditConflict                 desired.yaml changed under an edit, retries ran out
    ├── PermanentError                   retrying will not help
    │   ├── PermanentCloudError          PERMISSION_DENIED, INVALID_ARGUMENT, closed queue
    │   │   └── QuotaExceeded            a create refused for a named quota (429 + quota id)
    │   ├── HostKeyMismatch              a worker's SSH host key changed for the same node
    │   │   └── UntrustedHostKeys        ... or known_hosts is not the controller's file
    │   ├── NoMachine                    an emulated node: no machine answers there   exit 69
    │   ├── UnsafeName                   a name that must never reach a subprocess
    │   ├── ControllerAlreadyRunning     a second controller for the same desired file  exit 75
    │   ├── EditRejected                 an intent edit refused (unknown slot, op-id reuse)
    │   │   ├── InvalidEdit              ... because the file is or would become invalid
    │   │   ├── NeedsConfirmation        ... because it may delete capacity, unconfirmed  exit 2
    │   │   └── NotYourSlot              ... because another lab member owns it         exit 77
    │   ├── NotPermitted                 a lab's file this user may not use (the message
    │   │                                names its owner and the fix)                exit 77
    │   ├── ServiceError                 `service install/uninstall` refused
    │   └── InitError                    `init` cannot write a valid starter file
    ├── InvalidDesiredState              desired.yaml does not validate (diagnostics attached)
    ├── ViewError                        an intent view cannot answer (unknown slot, no snapshot)
    ├── StatusUnreadable                 status.json exists but is corrupt or of another schema
    ├── HistoryUnreadable                the capacity history store cannot be read (SQLite said)
    ├── SecretNotFound (LookupError)     no secret of that name is stored
    ├── SecretUnsafe (PermissionError)   a secret file others may read; it is not used
    └── DemoFailed                       the demo's story did not happen as told

The secret errors keep their standard-library base, so ``except OSError`` / ``LookupError``
callers still see them; adapters translate them before they reach the controller (``tailscale``
turns them into ``SetupFailed``). The emulator's own ``ApiError`` and ``ScenarioError`` are not
here: the emulator is a stand-alone server that imports nothing of the controller.

``CloudError`` is a mixin shared by both cloud error classes so callers can catch "anything the
cloud said" in one clause and still read its retry intent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from reconciler.exitcodes import (
    EX_CONFIRM,
    EX_NOPERM,
    EX_REFUSED,
    EX_TEMPFAIL,
    EX_UNAVAILABLE,
)


class ReconcilerError(Exception):
    """Base of every error this package raises on purpose."""

    #: What a command returns when it stops on this error (``exitcodes``).
    exit_code: ClassVar[int] = EX_REFUSED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TemporaryError(ReconcilerError):
    """Retry after ``delay`` seconds (a suggestion; the caller's backoff may lengthen it)."""

    exit_code: ClassVar[int] = EX_TEMPFAIL

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
        retry_after: float | None = None,
    ) -> None:
        TemporaryError.__init__(self, message, delay=delay)
        self.status = status
        self.code = code
        self.retry_after = retry_after  # the server's Retry-After, seconds (core.retry)


class OperationPending(TemporaryError):
    """The long-running operation of the last create or delete has not finished: look again
    later rather than send the request once more (``runtime.lro``)."""

    def __init__(self, message: str, *, operation: str, delay: float = 10.0) -> None:
        super().__init__(message, delay=delay)
        self.operation = operation


class PermanentCloudError(CloudError, PermanentError):
    def __init__(self, message: str, *, status: str | None = None, code: int | None = None) -> None:
        PermanentError.__init__(self, message)
        self.status = status
        self.code = code


class QuotaExceeded(PermanentCloudError):
    """A create refused because it would pass a quota the cloud names (RESOURCE_EXHAUSTED,
    HTTP 429, "Quota '...' exhausted. Limit: 64 in zone ..."): retrying will not help until
    the use under that quota drops or the intent changes. ``quota_id``, ``limit``, ``scope``
    ("zone" | "region") and ``place`` are what the text said (None when it did not)."""

    def __init__(
        self,
        message: str,
        *,
        quota_id: str,
        limit: int | None = None,
        scope: str | None = None,
        place: str | None = None,
        status: str | None = "RESOURCE_EXHAUSTED",
        code: int | None = 429,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.quota_id = quota_id
        self.limit = limit
        self.scope = scope
        self.place = place


class SetupFailed(TemporaryError):
    """A setup step (bootstrap script, tailscale join) failed; ``worker`` says where."""

    def __init__(
        self, message: str, *, worker: int | None = None, log_tail: str = "", delay: float = 30.0
    ) -> None:
        super().__init__(message, delay=delay)
        self.worker = worker
        self.log_tail = log_tail


class WorkloadError(TemporaryError):
    """Launching, stopping or reading the user's program failed on a worker (SSH down, the
    wrapper refused, a secret missing); ``worker`` says where when one worker is to blame. A
    failed *probe* is never this: it is the worker state "unknown"."""

    def __init__(self, message: str, *, worker: int | None = None, delay: float = 10.0) -> None:
        super().__init__(message, delay=delay)
        self.worker = worker


class RemoteCommandFailed(SetupFailed):
    """A remote command (script, ``tailscale up``) exited non-zero; ``exit_status`` is None
    when it was killed by a signal or timed out."""

    def __init__(
        self, message: str, *, exit_status: int | None, worker: int, log_tail: str
    ) -> None:
        super().__init__(message, worker=worker, log_tail=log_tail)
        self.exit_status = exit_status


class HostKeyMismatch(PermanentError):
    """A worker presented a different host key than the one pinned for this node instance."""


class UntrustedHostKeys(HostKeyMismatch):
    """The known_hosts file is owned by someone the controller does not trust (in a lab's
    group-writable state directory a member may have replaced it): no host is trusted from it."""


class NoMachine(PermanentError):
    """The node's address is from a documentation range (RFC 5737), as the emulator hands out:
    no machine stands behind it, so SSH, logs, tmux and setup say so at once instead of dialling
    and waiting for a timeout."""

    exit_code: ClassVar[int] = EX_UNAVAILABLE


class UnsafeName(PermanentError):
    """A name that failed validation and must not reach gcloud, SSH or tmux."""


class ControllerAlreadyRunning(PermanentError):
    """Another controller holds this desired file's lock (``pid`` when known)."""

    exit_code: ClassVar[int] = EX_TEMPFAIL  # `run` again once the other one stopped

    def __init__(self, message: str, *, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class EditConflict(TemporaryError):
    """desired.yaml kept changing under an intent edit; nothing was written."""


class EditRejected(PermanentError):
    """An intent edit was refused (unknown slot, invalid result, op-id reuse); nothing written."""


class NeedsConfirmation(EditRejected):
    """The edit can make the controller delete capacity and the caller did not confirm."""

    exit_code: ClassVar[int] = EX_CONFIRM


class NotYourSlot(EditRejected):
    """The edit changes a slot or race group another user owns, and the lab's policy does not
    let this user do that; the message says whose it is."""

    exit_code: ClassVar[int] = EX_NOPERM

    def __init__(self, message: str, *, owner: str) -> None:
        super().__init__(message)
        self.owner = owner


class NotPermitted(PermanentError):
    """A lab's state this user may not use or change: a member running the lab's controller,
    an intent lock they cannot open, a file only its owner may write. One line naming the
    owner and the command that fixes it."""

    exit_code: ClassVar[int] = EX_NOPERM


class ServiceError(PermanentError):
    """Install or uninstall refused; the message says why and what to do."""


class InitError(PermanentError):
    """The answers cannot make a valid file, or the file exists; the message says which."""


class ViewError(ReconcilerError):
    """A view cannot answer (unknown slot, no address yet, unreadable snapshot)."""


class SecretNotFound(ReconcilerError, LookupError):
    """No secret of that name is stored."""


class SecretUnsafe(ReconcilerError, PermissionError):
    """A secret file (or its directory) is readable by others; it is not used."""


class DemoFailed(ReconcilerError):
    """The demo's story did not happen as told (a step timed out or the controller misbehaved)."""


@dataclass(frozen=True)
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


class InvalidEdit(EditRejected):
    """An edit refused because desired.yaml is, or would become, invalid."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...]) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


class StatusUnreadable(ReconcilerError):
    """The status snapshot exists but cannot be used (corrupt, unknown schema, wrong shape):
    reported, never taken for "no snapshot"."""

    def __init__(self, path: object, why: str) -> None:
        super().__init__(f"status snapshot {path} is unreadable: {why}")
        self.path = path
        self.why = why


class HistoryUnreadable(ReconcilerError):
    """The capacity history store (``history.sqlite``) could not be read: SQLite's words in
    the message. Readers report it; the controller's writer repairs or rebuilds the store."""
