"""The OS Login user name for SSH, looked up once with gcloud and cached in the state dir.

``gcloud compute os-login describe-profile --format=json`` takes seconds, so the answer —
``posixAccounts[0].username`` (the account marked ``primary`` when there is one) — is kept in
the state directory's ``oslogin_user`` file (0600) and reused. A cached value that no longer
validates is ignored and looked up again; ``refresh=True`` forces a lookup.

May: run gcloud (argument list, timeout, never a shell) with the caller's environment, read and
atomically write the cache file. May not: block the event loop (the subprocess is awaited),
or return a name that did not pass ``names.check_user``. Failures become ``SetupFailed``: the
user is only needed for setup, and a retry may well succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.adapters.files import atomic_write
from reconciler.errors import SetupFailed, UnsafeName
from reconciler.model.names import check_user


def read_cached(path: Path) -> str | None:
    """The cached user, or None when absent or invalid."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
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
    *, gcloud: str = "gcloud", env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> str:
    """Ask gcloud for the OS Login user (no cache)."""
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
            f"gcloud os-login describe-profile timed out after {timeout:g}s"
        ) from None
    if proc.returncode != 0:
        tail = "\n".join(err.decode("utf-8", "replace").strip().splitlines()[-5:])
        raise SetupFailed(
            f"gcloud os-login describe-profile exited {proc.returncode}: {tail}", log_tail=tail
        )
    try:
        profile = json.loads(out)
    except ValueError:
        raise SetupFailed("gcloud os-login describe-profile printed no JSON") from None
    return username_from_profile(profile)


async def resolve_user(
    cache: Path,
    *,
    refresh: bool = False,
    gcloud: str = "gcloud",
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> str:
    """The OS Login user: from ``cache`` (``StateDir.oslogin_user``) unless missing, invalid
    or ``refresh``; otherwise looked up with gcloud and cached."""
    if not refresh:
        cached = read_cached(cache)
        if cached is not None:
            return cached
    user = await lookup(gcloud=gcloud, env=env, timeout=timeout)
    with contextlib.suppress(OSError):  # a cache that cannot be written costs only time
        atomic_write(cache, user + "\n")
    return user
