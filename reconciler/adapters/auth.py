"""Access tokens for the REST backend: where they come from, how long they are kept, and which
project their quota is charged to.

Purpose: hand ``adapters.rest`` a bearer token, cached until a few minutes before it expires,
and fetch a fresh one when the API says the old one is no longer good (``invalidate`` after a
401, the safety net). Sources, in the order gcloud itself uses them
(``token_provider_from_env``):

1. ``CLOUDSDK_AUTH_ACCESS_TOKEN`` — a token in the environment;
2. ``CLOUDSDK_AUTH_ACCESS_TOKEN_FILE`` — a file holding one token (re-read after a 401), so
   tests, the emulator and demos need no gcloud installed;
3. ``settings.credentials: adc`` (or no gcloud on PATH): Application Default Credentials
   through google-auth — ``GOOGLE_APPLICATION_CREDENTIALS`` (a service-account or
   authorized-user file), gcloud's ADC file, or the GCE metadata server;
4. ``settings.credentials: gcloud`` (the default): ``gcloud config config-helper
   --format=json --min-expiry=…``, which prints the token *and its expiry* and refreshes it
   itself when it is that close to expiring.

Every provider also says what it learned about the quota project (``quota``: gcloud's
``billing/quota_project``, the credentials' ``quota_project_id``, whether they are a user's);
``choose_quota_project`` turns that and ``settings.quota_project`` into the
``X-Goog-User-Project`` header gcloud would send.

May: read the token file, run gcloud, call google-auth. Must: never put a token in a log, an
exception message, argv or a ``repr``. May not: decide anything about the cloud.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from reconciler.adapters import gcloud_stderr
from reconciler.errors import PermanentCloudError, TransientCloudError

TOKEN_ENV: Final = "CLOUDSDK_AUTH_ACCESS_TOKEN"
TOKEN_FILE_ENV: Final = "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"
QUOTA_ENV: Final = "CLOUDSDK_BILLING_QUOTA_PROJECT"
CLOUD_PLATFORM_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"
#: A token whose expiry nobody told us is kept at most this long (gcloud's live an hour).
GCLOUD_TOKEN_TTL: Final = 50 * 60.0
#: However far away an expiry claims to be, a token is kept at most this long.
MAX_KEEP: Final = 12 * 3600.0
#: Refresh a token whose expiry is known this long before it expires.
EXPIRY_MARGIN: Final = 5 * 60.0
#: A token with less than EXPIRY_MARGIN left (a metadata server hands out its cached token until
#: shortly before expiry) is still kept this long, never past ``expiry - LAST_SECONDS``, so
#: it is not fetched again for every request.
MIN_KEEP: Final = 30.0
LAST_SECONDS: Final = 10.0
#: ``--min-expiry`` for config-helper: more than the margin, so gcloud refreshes by itself
#: whenever we come back for a token inside the margin.
GCLOUD_MIN_EXPIRY: Final = EXPIRY_MARGIN + 60.0
_AUTH_DELAY: Final = 30.0
_MAX_TOKEN_CHARS: Final = 8192
#: gcloud's ``billing/quota_project`` values that are not a project id.
CURRENT_PROJECT: Final = frozenset({"CURRENT_PROJECT", "CURRENT_PROJECT_WITH_FALLBACK"})
LEGACY: Final = "LEGACY"


@dataclass(frozen=True, slots=True)
class QuotaHint:
    """What a credential source knows about quota: a configured project (or gcloud's
    ``CURRENT_PROJECT`` / ``LEGACY``), where that came from, and whether the credentials
    are a user's (``None``: not known yet)."""

    configured: str | None = None
    source: str = ""
    user: bool | None = True


@dataclass(frozen=True, slots=True)
class QuotaChoice:
    """The ``X-Goog-User-Project`` to send (None: no header) and why, for ``doctor``."""

    project: str | None
    source: str


def choose_quota_project(setting: str | None, hint: QuotaHint, project: str) -> QuotaChoice:
    """gcloud's rule (``creds.GetQuotaProject``), with ``settings.quota_project`` first:
    a configured project is sent for any credentials; ``CURRENT_PROJECT`` (gcloud's default)
    means the project for user credentials and nothing for a service account; ``LEGACY``
    means nothing."""
    if setting:
        return QuotaChoice(setting, "settings.quota_project")
    configured = hint.configured
    if configured == LEGACY:
        return QuotaChoice(None, f"none: {hint.source or 'billing/quota_project'} is LEGACY")
    if configured and configured not in CURRENT_PROJECT:
        return QuotaChoice(configured, hint.source or "billing/quota_project")
    if hint.user is False:
        return QuotaChoice(None, "none: a service account uses its own project's quota")
    return QuotaChoice(project, "the project, as for user credentials")


class TokenProvider(Protocol):
    """A source of bearer tokens. ``token`` may be called concurrently."""

    async def token(self) -> str: ...

    def invalidate(self) -> None:
        """The last token was refused (401): the next ``token()`` fetches a fresh one."""
        ...

    @property
    def quota(self) -> QuotaHint:
        """What this source knows about the quota project (complete after one ``token``)."""
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


def _env_hint(env: Mapping[str, str]) -> QuotaHint:
    """A bare token: gcloud's environment override, else assumed a user's (gcloud's
    ``print-access-token`` warns that such a token may need the quota project)."""
    return QuotaHint(env.get(QUOTA_ENV) or None, QUOTA_ENV, True)


class EnvAccessToken:
    """A fixed token from ``CLOUDSDK_AUTH_ACCESS_TOKEN`` (gcloud honours it first, too)."""

    def __init__(self, token: str, env: Mapping[str, str] | None = None) -> None:
        self._token = _checked(token, TOKEN_ENV)
        self.quota = _env_hint(env or {})

    async def token(self) -> str:
        return self._token

    def invalidate(self) -> None:
        """Nothing to refresh: the next 401 is final."""

    def __repr__(self) -> str:
        return f"EnvAccessToken({TOKEN_ENV})"


class AccessTokenFile:
    """A token read from a file (``CLOUDSDK_AUTH_ACCESS_TOKEN_FILE``), re-read after a 401 or
    when the file changes, so whoever rotates the file need not restart the controller."""

    def __init__(self, path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> None:
        self._path = Path(path)
        self._token: str | None = None
        self._stamp: tuple[int, int] | None = None
        self.reads = 0  # how often the file was read (tests, diagnostics)
        self.quota = _env_hint(env or {})

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
    """A token with an expiry, fetched once at a time however many callers ask, and kept
    until ``EXPIRY_MARGIN`` before it expires. ``wall`` is the wall clock the expiry is
    compared with (injectable for tests)."""

    def __init__(self, wall: Callable[[], float]) -> None:
        self._wall = wall
        self._token: str | None = None
        self._until = 0.0
        self._lock = asyncio.Lock()
        self.fetches = 0
        self.quota = QuotaHint(user=None)

    def _fresh(self) -> bool:
        return self._token is not None and self._wall() < self._until

    async def token(self) -> str:
        if self._fresh():
            assert self._token is not None
            return self._token
        async with self._lock:
            if not self._fresh():
                token, expiry = await self._fetch()
                self.fetches += 1
                self._token, self._until = token, keep_until(expiry, self._wall())
            assert self._token is not None
            return self._token

    def invalidate(self) -> None:
        self._token = None

    async def _fetch(self) -> tuple[str, float | None]:
        """A fresh token and its expiry (epoch seconds; None when not told)."""
        raise NotImplementedError


def keep_until(expiry: float | None, now: float) -> float:
    """When to stop using a token that expires at ``expiry`` (epoch seconds, None: unknown):
    ``EXPIRY_MARGIN`` before it (at most ``MAX_KEEP`` from now); one already inside the margin
    ``MIN_KEEP`` (but never into its last ``LAST_SECONDS``); an unknown expiry is kept
    ``GCLOUD_TOKEN_TTL``."""
    if expiry is None:
        return now + GCLOUD_TOKEN_TTL
    kept = min(now + MAX_KEEP, expiry - EXPIRY_MARGIN)
    return max(kept, min(now + MIN_KEEP, expiry - LAST_SECONDS))


def parse_expiry(value: object) -> float | None:
    """``2026-12-01T06:26:13Z`` (config-helper) or a datetime (google-auth: naive UTC) ->
    epoch seconds; None when absent or unreadable."""
    when: dt.datetime | None = None
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, str) and value:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


class GcloudAccessToken(_Cached):
    """``gcloud config config-helper --format=json --min-expiry=6m``: the token, its expiry
    and gcloud's configuration (``billing/quota_project``, the account) in one run."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        gcloud: str | None = None,
        timeout: float = 60.0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(wall)
        self._env = dict(os.environ if env is None else env)
        self._gcloud = gcloud
        self._timeout = timeout

    async def _fetch(self) -> tuple[str, float | None]:
        gcloud = self._gcloud or shutil.which("gcloud", path=self._env.get("PATH"))
        if not gcloud:
            raise PermanentCloudError(
                "gcloud not found: install the Google Cloud SDK, set "
                f"settings.credentials: adc, or set {TOKEN_FILE_ENV}",
                status="UNAUTHENTICATED",
            )
        argv = [
            gcloud,
            "config",
            "config-helper",
            "--format=json",
            f"--min-expiry={int(GCLOUD_MIN_EXPIRY)}s",
        ]
        out = await _run_gcloud(argv, self._env, self._timeout)
        try:
            data: Any = json.loads(out)
            credential = data["credential"]
            raw = credential["access_token"]
        except (ValueError, KeyError, TypeError):
            raise TransientCloudError(
                "gcloud config config-helper printed no credential JSON",
                delay=_AUTH_DELAY,
                status="UNAUTHENTICATED",
            ) from None
        token = _checked(str(raw or ""), "gcloud config config-helper")
        self.quota = _gcloud_hint(data)
        return token, parse_expiry(credential.get("token_expiry"))

    def __repr__(self) -> str:
        return "GcloudAccessToken()"


def _gcloud_hint(data: Any) -> QuotaHint:
    props = (data.get("configuration") or {}).get("properties") or {}
    billing = props.get("billing") or {}
    core = props.get("core") or {}
    auth = props.get("auth") or {}
    account = str(core.get("account") or "")
    configured = billing.get("quota_project")
    user = not account.endswith(".gserviceaccount.com") or bool(auth.get("access_token_file"))
    return QuotaHint(str(configured) if configured else None, "gcloud billing/quota_project", user)


async def _run_gcloud(argv: list[str], env: Mapping[str, str], timeout: float) -> str:
    what = " ".join(argv[1:3])
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,  # its own process group: a timeout ends all of it
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException as exc:  # a timeout, or our caller was cancelled: end it all
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.shield(proc.wait())
        if isinstance(exc, TimeoutError):
            raise TransientCloudError(
                f"gcloud {what} timed out after {timeout:g}s",
                delay=_AUTH_DELAY,
                status="DEADLINE_EXCEEDED",
            ) from None
        raise
    if proc.returncode != 0:
        raise _gcloud_failure(what, err.decode("utf-8", "replace"))
    return out.decode("utf-8", "replace")


_NETWORK_HINTS: Final = ("connection", "timed out", "temporary failure", "unreachable", "network")


def _gcloud_failure(what: str, stderr: str) -> PermanentCloudError | TransientCloudError:
    """Not logged in never heals by itself; a network hiccup while refreshing does."""
    said = gcloud_stderr.message(stderr, limit=400) or "no output"  # the cause, not the boilerplate
    if "gcloud auth login" in stderr and "gcloud auth login" not in said:
        said += " (run `gcloud auth login`)"
    message = f"gcloud {what} failed: {said}"
    if any(hint in said.lower() for hint in _NETWORK_HINTS):
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
    """ADC through google-auth: ``google.auth.default()`` finds a service-account or
    authorized-user file (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's ADC file) or the GCE
    metadata server (``GCE_METADATA_HOST``), and ``refresh`` talks to its token endpoint."""

    def __init__(self, *, wall: Callable[[], float] = time.time) -> None:
        super().__init__(wall)
        if not google_auth_available():
            raise PermanentCloudError(
                "Application Default Credentials need google-auth and requests "
                "(pip install 'google-auth[requests]')",
                status="UNAUTHENTICATED",
            )
        self._credentials: Any = None

    async def _fetch(self) -> tuple[str, float | None]:
        return await asyncio.to_thread(self._refresh)

    def _refresh(self) -> tuple[str, float | None]:
        google_auth: Any = importlib.import_module("google.auth")
        transport: Any = importlib.import_module("google.auth.transport.requests")
        try:
            if self._credentials is None:
                self._credentials, _ = google_auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
                if not self._credentials.valid:  # a file may carry a token still good
                    self._credentials.refresh(transport.Request())
            else:  # we came back inside the margin (or after a 401): a fresh token
                self._credentials.refresh(transport.Request())
        except Exception as exc:  # google-auth's own hierarchy: its type and first line
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            missing: Any = importlib.import_module("google.auth.exceptions")
            if isinstance(exc, missing.DefaultCredentialsError):  # no ADC configured at all:
                raise PermanentCloudError(  # retrying every 30 s will not make one appear
                    f"Application Default Credentials not found: {first}",
                    status="UNAUTHENTICATED",
                ) from None
            raise TransientCloudError(
                f"Application Default Credentials failed: {type(exc).__name__}: {first}",
                delay=_AUTH_DELAY,
                status="UNAUTHENTICATED",
            ) from None
        creds = self._credentials
        token = _checked(str(creds.token or ""), "Application Default Credentials")
        # Only an authorized-user file is a person's; service accounts and the metadata
        # server are billed to their own project unless a quota project is configured.
        user = type(creds).__module__ == "google.oauth2.credentials"
        configured = getattr(creds, "quota_project_id", None)
        self.quota = QuotaHint(
            str(configured) if configured else None, "the credentials' quota_project_id", user
        )
        return token, parse_expiry(creds.expiry)

    def __repr__(self) -> str:
        return "ApplicationDefaultCredentials()"


def token_provider_from_env(
    env: Mapping[str, str] | None = None, *, adc: bool = False
) -> TokenProvider:
    """The token source the environment asks for (see the module docstring for the order).
    ``adc`` (``settings.credentials: adc``) chooses Application Default Credentials over
    gcloud when no token is given; without gcloud on PATH they are chosen anyway."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return EnvAccessToken(env[TOKEN_ENV], env)
    if env.get(TOKEN_FILE_ENV):
        return AccessTokenFile(env[TOKEN_FILE_ENV], env)
    if adc or shutil.which("gcloud", path=env.get("PATH")) is None:
        return ApplicationDefaultCredentials()
    return GcloudAccessToken(env)
