"""The OS Login user name for SSH, looked up with gcloud, cached in the state dir, and a failed
lookup remembered so that it is not repeated before its backoff runs out.

``gcloud compute os-login describe-profile --format=json`` takes a second or more, so the
answer — ``posixAccounts[0].username`` (the account marked ``primary`` when there is one) — is
kept in the state directory's ``oslogin_user`` file (0600) and reused. A cached value that no
longer validates is ignored and looked up again; ``refresh=True`` forces a lookup.

A lookup that fails (no credentials, no network, an endpoint that refuses) is remembered in
``oslogin_user.failed`` beside the cache (0600 JSON: the cause, when, how many in a row, when
to try again) and in the ``UserResolver`` that made it. Until the backoff (1 min, doubling to
15 min) runs out, every caller — the controller's setup steps for every slot, ``logs``,
``ssh``, the MCP server — gets the same failure at once, naming ``settings.ssh_user`` as the
way around it, and no gcloud runs. A successful lookup forgets the failure.

May: run gcloud (argument list, timeout, never a shell) with the caller's environment, read and
atomically write the cache and the failure record. May not: block the event loop (the
subprocess is awaited), or return a name that did not pass ``names.check_user``. Failures
become ``SetupFailed``: the user is only needed for SSH, and a later lookup may well succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.files import atomic_write
from reconciler.adapters.gcloud_stderr import message as gcloud_message
from reconciler.errors import SetupFailed, UnsafeName
from reconciler.model.names import check_user
from reconciler.model.times import utc_text

#: Seconds a lookup may take: gcloud answers in one or two; a hung network must not hold SSH.
DEFAULT_TIMEOUT: Final = 8.0
#: The wait after the first failed lookup, doubled per failure in a row up to ``BACKOFF_MAX``.
BACKOFF_FIRST: Final = 60.0
BACKOFF_MAX: Final = 900.0
HINT: Final = "set settings.ssh_user in desired.yaml to skip this lookup"


def read_cached(path: Path) -> str | None:
    """The cached user, or None when absent or invalid."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None
    try:
        return check_user(text)
    except UnsafeName:
        return None


def username_from_profile(profile: Any) -> str:
    """``posixAccounts[primary or 0].username`` of a describe-profile document, validated."""
    accounts = profile.get("posixAccounts") if isinstance(profile, dict) else None
    if not isinstance(accounts, list) or not accounts:
        raise SetupFailed("the OS Login profile has no POSIX account (posixAccounts is empty)")
    chosen = next(
        (a for a in accounts if isinstance(a, dict) and a.get("primary") is True), accounts[0]
    )
    name = chosen.get("username") if isinstance(chosen, dict) else None
    try:
        return check_user(name)
    except UnsafeName as exc:
        raise SetupFailed(f"the OS Login profile has an unusable user name: {exc}") from None


async def lookup(
    *,
    gcloud: str = "gcloud",
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """Ask gcloud for the OS Login user (no cache, no failure record)."""
    argv = [gcloud, "compute", "os-login", "describe-profile", "--format=json"]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise SetupFailed(f"cannot run {gcloud}: {exc.strerror or exc}") from None
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise SetupFailed(
            f"gcloud compute os-login describe-profile timed out after {timeout:g}s"
        ) from None
    if proc.returncode != 0:
        cause = gcloud_message(err.decode("utf-8", "replace")) or "(no message)"
        raise SetupFailed(
            f"gcloud compute os-login describe-profile exited {proc.returncode}: {cause}"
        )
    try:
        profile = json.loads(out)
    except ValueError:
        raise SetupFailed("gcloud compute os-login describe-profile printed no JSON") from None
    return username_from_profile(profile)


# --- the failure record -------------------------------------------------------------------------


def failure_path(cache: Path) -> Path:
    """``oslogin_user.failed``, beside the cache file ``cache``."""
    return cache.with_name(cache.name + ".failed")


def backoff(failures: int) -> float:
    """Seconds before the next lookup after ``failures`` failed ones in a row."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** min(max(failures, 1) - 1, 16))


@dataclass(frozen=True, slots=True)
class LookupFailure:
    """A failed lookup: its cause, when it happened, how many in a row, when to try again."""

    cause: str
    at: float
    failures: int
    retry_at: float

    def waiting(self, now: float) -> bool:
        """Still inside its backoff (a record from the future — a clock set back — is not)."""
        return self.at <= now + 1.0 and now < self.retry_at

    def error(self, now: float) -> SetupFailed:
        """The one-line error every caller gets until ``retry_at``."""
        return SetupFailed(
            f"cannot find the OS Login user for SSH: {self.cause} "
            f"({HINT}; next lookup after {utc_text(self.retry_at)})",
            delay=max(1.0, self.retry_at - now),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "error": self.cause,
            "at": utc_text(self.at),
            "at_epoch": self.at,
            "failures": self.failures,
            "retry_at": utc_text(self.retry_at),
            "retry_at_epoch": self.retry_at,
        }


def read_failure(path: Path) -> LookupFailure | None:
    """The failure record at ``path`` (``failure_path(cache)``), or None when absent or
    unreadable (an unreadable record only costs a lookup)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        failure = LookupFailure(
            cause=str(doc["error"]),
            at=float(doc["at_epoch"]),
            failures=int(doc["failures"]),
            retry_at=float(doc["retry_at_epoch"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return failure


def write_failure(path: Path, failure: LookupFailure) -> None:
    with contextlib.suppress(OSError):  # a record that cannot be written costs only lookups
        atomic_write(path, json.dumps(failure.to_json(), indent=2) + "\n", durable=False)


def clear_failure(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


class UserResolver:
    """The OS Login user with a cache and a remembered failure, one lookup at a time.

    Concurrent ``resolve`` calls (forty slots' setup steps in one pass) share one lookup; a
    failure is answered from memory, or from the record another process left in the state dir,
    until its backoff runs out. ``report`` is called once per failed lookup (not per caller).
    """

    def __init__(
        self,
        cache: Path,
        *,
        gcloud: str = "gcloud",
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], float] = time.time,
        report: Callable[[SetupFailed], None] | None = None,
    ) -> None:
        self.cache = cache
        self.failed_path = failure_path(cache)
        self.gcloud, self.env, self.timeout = gcloud, env, timeout
        self.clock = clock
        self.report = report
        self.lookups = 0  # gcloud runs made by this resolver
        self._failure: LookupFailure | None = None
        self._lock: asyncio.Lock | None = None

    def pending_failure(self) -> LookupFailure | None:
        """The failure still inside its backoff (this resolver's or the state dir's), if any."""
        now = self.clock()
        if self._failure is not None and self._failure.waiting(now):
            return self._failure  # waiting either way: no need to read the record
        newest = self._newest_failure()
        return newest if newest is not None and newest.waiting(now) else None

    def _newest_failure(self) -> LookupFailure | None:
        """The later of this resolver's failure and the state dir's record (one read)."""
        candidates = [f for f in (self._failure, read_failure(self.failed_path)) if f]
        return max(candidates, key=lambda f: f.at, default=None)

    async def resolve(self, *, refresh: bool = False) -> str:
        """The cached user, else one lookup — unless a failed one is still in its backoff,
        which is then raised again at once (``SetupFailed`` naming ``settings.ssh_user``).
        ``refresh`` looks up even so."""
        if not refresh and (cached := read_cached(self.cache)) is not None:
            return cached
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not refresh and (cached := read_cached(self.cache)) is not None:
                return cached  # found by the lookup this call waited for
            now = self.clock()
            previous = self._newest_failure()
            if not refresh and previous is not None and previous.waiting(now):
                self._failure = previous
                raise previous.error(now)
            self.lookups += 1
            try:
                user = await lookup(gcloud=self.gcloud, env=self.env, timeout=self.timeout)
            except SetupFailed as exc:
                now = self.clock()
                failures = (previous.failures if previous else 0) + 1
                failure = LookupFailure(exc.message, now, failures, now + backoff(failures))
                self._failure = failure
                write_failure(self.failed_path, failure)
                error = failure.error(now)
                if self.report is not None:
                    self.report(error)
                raise error from None
            self._failure = None
            clear_failure(self.failed_path)
            with contextlib.suppress(OSError):  # a cache that cannot be written costs only time
                atomic_write(self.cache, user + "\n")
            return user


async def resolve_user(
    cache: Path,
    *,
    refresh: bool = False,
    gcloud: str = "gcloud",
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """The OS Login user: from ``cache`` (``StateDir.oslogin_user``) unless missing, invalid
    or ``refresh``; otherwise looked up with gcloud and cached — unless a lookup failed lately
    (the record beside the cache), which is then raised again without running gcloud."""
    resolver = UserResolver(cache, gcloud=gcloud, env=env, timeout=timeout)
    return await resolver.resolve(refresh=refresh)
