"""Access tokens for the REST backend: where they come from and how long they are kept.

Purpose: hand ``adapters.rest`` a bearer token, cached, and fetch a fresh one when the API
says the old one is no longer good (``invalidate`` after a 401). Sources, in the order gcloud
itself uses them (``token_provider_from_env``):

1. ``CLOUDSDK_AUTH_ACCESS_TOKEN`` — a token in the environment;
2. ``CLOUDSDK_AUTH_ACCESS_TOKEN_FILE`` — a file holding one token (re-read after a 401), so
   tests, the emulator and demos need no gcloud installed;
3. Application Default Credentials through google-auth, *only when asked for* and only when
   ``google.auth`` imports (it is an optional dependency, not installed by default);
4. ``gcloud auth print-access-token`` (argument list, stdin closed, a timeout), cached ~50 min.

May: read the token file, run gcloud, call google-auth. Must: never put a token in a log, an
exception message, argv or a ``repr``. May not: decide anything about the cloud.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from reconciler.errors import PermanentCloudError, TransientCloudError

TOKEN_ENV: Final = "CLOUDSDK_AUTH_ACCESS_TOKEN"
TOKEN_FILE_ENV: Final = "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"
CLOUD_PLATFORM_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"
#: gcloud prints no expiry; its tokens live an hour, so keep one for at most this long.
GCLOUD_TOKEN_TTL: Final = 50 * 60.0
#: Refresh a token whose expiry is known this long before it expires.
EXPIRY_MARGIN: Final = 5 * 60.0
_AUTH_DELAY: Final = 30.0
_MAX_TOKEN_CHARS: Final = 8192


class TokenProvider(Protocol):
    """A source of bearer tokens. ``token`` may be called concurrently."""

    async def token(self) -> str: ...

    def invalidate(self) -> None:
        """The last token was refused (401): the next ``token()`` fetches a fresh one."""
        ...


def _checked(raw: str, source: str) -> str:
    token = raw.strip()
    if not token:
        raise PermanentCloudError(f"no access token in {source}", status="UNAUTHENTICATED")
    if len(token) > _MAX_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        # Never echo it: a malformed token may still be a secret.
        raise PermanentCloudError(
            f"the access token from {source} is malformed", status="UNAUTHENTICATED"
        )
    return token


class EnvAccessToken:
    """A fixed token from ``CLOUDSDK_AUTH_ACCESS_TOKEN`` (gcloud honours it first, too)."""

    def __init__(self, token: str) -> None:
        self._token = _checked(token, TOKEN_ENV)

    async def token(self) -> str:
        return self._token

    def invalidate(self) -> None:
        """Nothing to refresh: the next 401 is final."""

    def __repr__(self) -> str:
        return f"EnvAccessToken({TOKEN_ENV})"


class AccessTokenFile:
    """A token read from a file (``CLOUDSDK_AUTH_ACCESS_TOKEN_FILE``), re-read after a 401 or
    when the file changes, so whoever rotates the file need not restart the controller."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._token: str | None = None
        self._stamp: tuple[int, int] | None = None
        self.reads = 0  # how often the file was read (tests, diagnostics)

    async def token(self) -> str:
        try:
            st = self._path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            if self._token is None or stamp != self._stamp:
                raw = self._path.read_text(encoding="utf-8", errors="replace")
                self.reads += 1
                self._token, self._stamp = _checked(raw, f"token file {self._path}"), stamp
        except OSError as exc:
            raise PermanentCloudError(
                f"cannot read the access token file {self._path}: {exc.strerror or exc}",
                status="UNAUTHENTICATED",
            ) from None
        return self._token

    def invalidate(self) -> None:
        self._token = None

    def __repr__(self) -> str:
        return f"AccessTokenFile({str(self._path)!r})"


class _Cached:
    """A token with a deadline, fetched once at a time however many callers ask."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._token: str | None = None
        self._until = 0.0
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def token(self) -> str:
        if self._token is not None and self._clock() < self._until:
            return self._token
        async with self._lock:
            if self._token is None or self._clock() >= self._until:
                token, lifetime = await self._fetch()
                self.fetches += 1
                self._token, self._until = token, self._clock() + lifetime
            return self._token

    def invalidate(self) -> None:
        self._token = None

    async def _fetch(self) -> tuple[str, float]:
        """A fresh token and how many seconds it may be used."""
        raise NotImplementedError


class GcloudPrintAccessToken(_Cached):
    """``gcloud auth print-access-token``, kept ``ttl`` seconds (gcloud prints no expiry)."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        gcloud: str | None = None,
        ttl: float = GCLOUD_TOKEN_TTL,
        timeout: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock)
        self._env = dict(os.environ if env is None else env)
        self._gcloud = gcloud
        self._ttl = ttl
        self._timeout = timeout

    async def _fetch(self) -> tuple[str, float]:
        gcloud = self._gcloud or shutil.which("gcloud", path=self._env.get("PATH"))
        if not gcloud:
            raise PermanentCloudError(
                f"gcloud not found: install the Google Cloud SDK or set {TOKEN_FILE_ENV}",
                status="UNAUTHENTICATED",
            )
        proc = await asyncio.create_subprocess_exec(
            gcloud,
            "auth",
            "print-access-token",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._env,
            start_new_session=True,  # its own process group: a timeout ends all of it
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout)
        except BaseException as exc:  # a timeout, or our caller was cancelled: end it all
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.shield(proc.wait())
            if isinstance(exc, TimeoutError):
                raise TransientCloudError(
                    f"gcloud auth print-access-token timed out after {self._timeout:g}s",
                    delay=_AUTH_DELAY,
                    status="DEADLINE_EXCEEDED",
                ) from None
            raise
        if proc.returncode != 0:
            raise _gcloud_failure(err.decode("utf-8", "replace"))
        return _checked(out.decode("utf-8", "replace"), "gcloud auth print-access-token"), self._ttl

    def __repr__(self) -> str:
        return "GcloudPrintAccessToken()"


_NETWORK_HINTS: Final = ("connection", "timed out", "temporary failure", "unreachable", "network")


def _gcloud_failure(stderr: str) -> PermanentCloudError | TransientCloudError:
    """Not logged in never heals by itself; a network hiccup while refreshing does."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    tail = " ".join(lines[-3:])[-400:] or "no output"
    message = f"gcloud auth print-access-token failed: {tail}"
    if any(hint in tail.lower() for hint in _NETWORK_HINTS):
        return TransientCloudError(message, delay=_AUTH_DELAY, status="UNAVAILABLE")
    return PermanentCloudError(message, status="UNAUTHENTICATED")


def google_auth_available() -> bool:
    try:
        importlib.import_module("google.auth")
        importlib.import_module("google.auth.transport.requests")
    except ImportError:
        return False
    return True


class ApplicationDefaultCredentials(_Cached):
    """ADC through google-auth (optional: raises PermanentCloudError when not installed)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        if not google_auth_available():
            raise PermanentCloudError(
                "Application Default Credentials need google-auth, which is not installed "
                "(pip install google-auth requests)",
                status="UNAUTHENTICATED",
            )
        self._credentials: Any = None

    async def _fetch(self) -> tuple[str, float]:
        return await asyncio.to_thread(self._refresh)

    def _refresh(self) -> tuple[str, float]:
        google_auth: Any = importlib.import_module("google.auth")
        transport: Any = importlib.import_module("google.auth.transport.requests")
        try:
            if self._credentials is None:
                self._credentials, _ = google_auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            self._credentials.refresh(transport.Request())
        except Exception as exc:  # google-auth's own hierarchy; keep only its type
            raise TransientCloudError(
                f"Application Default Credentials failed: {type(exc).__name__}",
                delay=_AUTH_DELAY,
                status="UNAUTHENTICATED",
            ) from None
        token = _checked(str(self._credentials.token or ""), "Application Default Credentials")
        return token, _lifetime(self._credentials.expiry)

    def __repr__(self) -> str:
        return "ApplicationDefaultCredentials()"


def _lifetime(expiry: Any) -> float:
    """Seconds to keep a token expiring at ``expiry`` (google-auth: naive UTC datetime)."""
    if not isinstance(expiry, dt.datetime):
        return GCLOUD_TOKEN_TTL
    if expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=dt.UTC)
    left: float = (expiry - dt.datetime.now(dt.UTC)).total_seconds()
    return max(0.0, left - EXPIRY_MARGIN)


def token_provider_from_env(
    env: Mapping[str, str] | None = None, *, adc: bool = False
) -> TokenProvider:
    """The token source the environment asks for (see the module docstring for the order).
    ``adc`` chooses Application Default Credentials over gcloud when no token is given."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return EnvAccessToken(env[TOKEN_ENV])
    if env.get(TOKEN_FILE_ENV):
        return AccessTokenFile(env[TOKEN_FILE_ENV])
    if adc:
        return ApplicationDefaultCredentials()
    return GcloudPrintAccessToken(env)
