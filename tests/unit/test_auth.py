"""Token providers: where the REST backend's bearer token comes from, and how it is kept."""

from __future__ import annotations

import asyncio
import datetime as dt
import stat
import sys
import types
from pathlib import Path

import pytest

from reconciler.adapters import auth
from reconciler.adapters.auth import (
    AccessTokenFile,
    ApplicationDefaultCredentials,
    EnvAccessToken,
    GcloudPrintAccessToken,
    token_provider_from_env,
)
from reconciler.errors import PermanentCloudError, TransientCloudError

SECRET = "ya29.a-very-secret-token"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_gcloud(tmp_path: Path, body: str) -> tuple[Path, Path]:
    """A gcloud that records its argv and stdin in ``calls`` and then runs ``body``."""
    calls = tmp_path / "calls"
    script = tmp_path / "gcloud"
    script.write_text(f'#!/bin/sh\necho "$@ stdin=[$(cat)]" >> {calls}\n{body}\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, calls


# --- token file ------------------------------------------------------------------------------


async def test_token_file_is_read_once_and_again_after_invalidate(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {SECRET}\n", encoding="utf-8")
    provider = AccessTokenFile(path)
    assert await provider.token() == SECRET
    assert await provider.token() == SECRET
    assert provider.reads == 1
    provider.invalidate()
    assert await provider.token() == SECRET
    assert provider.reads == 2
    assert SECRET not in repr(provider)


async def test_a_rotated_token_file_is_picked_up(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first", encoding="utf-8")
    provider = AccessTokenFile(path)
    assert await provider.token() == "first"
    path.write_text("second-longer", encoding="utf-8")
    assert await provider.token() == "second-longer"


@pytest.mark.parametrize("content", [None, "", "   \n", f"{SECRET} extra", "a\x00b"])
async def test_bad_token_files_fail_permanently_without_echoing(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(PermanentCloudError) as caught:
        await AccessTokenFile(path).token()
    assert caught.value.status == "UNAUTHENTICATED"
    assert SECRET not in str(caught.value)


async def test_env_token() -> None:
    provider = EnvAccessToken(SECRET)
    assert await provider.token() == SECRET
    provider.invalidate()
    assert await provider.token() == SECRET
    assert SECRET not in repr(provider)


# --- gcloud ----------------------------------------------------------------------------------


async def test_gcloud_token_is_cached_for_its_ttl(tmp_path: Path) -> None:
    gcloud, calls = fake_gcloud(tmp_path, f"echo {SECRET}")
    clock = Clock()
    provider = GcloudPrintAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud), clock=clock)
    assert await provider.token() == SECRET
    clock.now += auth.GCLOUD_TOKEN_TTL - 1
    assert await provider.token() == SECRET
    assert provider.fetches == 1
    clock.now += 2
    assert await provider.token() == SECRET
    assert provider.fetches == 2
    provider.invalidate()
    await provider.token()
    assert provider.fetches == 3
    # argument list exactly, stdin closed (cat saw EOF at once, nothing piped in)
    assert calls.read_text().splitlines() == ["auth print-access-token stdin=[]"] * 3
    assert SECRET not in repr(provider)


async def test_concurrent_callers_share_one_gcloud_run(tmp_path: Path) -> None:
    gcloud, calls = fake_gcloud(tmp_path, f"sleep 0.2; echo {SECRET}")
    provider = GcloudPrintAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    tokens = await asyncio.gather(*(provider.token() for _ in range(5)))
    assert tokens == [SECRET] * 5
    assert len(calls.read_text().splitlines()) == 1


async def test_gcloud_found_on_the_path_given(tmp_path: Path) -> None:
    fake_gcloud(tmp_path, f"echo {SECRET}")
    provider = GcloudPrintAccessToken({"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert await provider.token() == SECRET


async def test_gcloud_missing_is_permanent_and_names_the_way_out(tmp_path: Path) -> None:
    provider = GcloudPrintAccessToken({"PATH": str(tmp_path)})
    with pytest.raises(PermanentCloudError, match="CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"):
        await provider.token()


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (
            "ERROR: (gcloud.auth.print-access-token) You do not currently have an active "
            "account selected.",
            PermanentCloudError,
        ),
        (
            "ERROR: There was a problem refreshing your current auth tokens: "
            "Failed to establish a new connection",
            TransientCloudError,
        ),
    ],
)
async def test_gcloud_failures_not_logged_in_permanent_network_transient(
    tmp_path: Path, stderr: str, kind: type[Exception]
) -> None:
    gcloud, _ = fake_gcloud(tmp_path, f"echo '{stderr}' >&2; exit 1")
    provider = GcloudPrintAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    with pytest.raises(kind, match="print-access-token failed: ERROR"):
        await provider.token()


async def test_a_hanging_gcloud_times_out_transiently(tmp_path: Path) -> None:
    gcloud, _ = fake_gcloud(tmp_path, f"sleep 30; echo {SECRET}")
    provider = GcloudPrintAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud), timeout=0.3)
    with pytest.raises(TransientCloudError, match="timed out"):
        await provider.token()


# --- ADC -------------------------------------------------------------------------------------


def test_adc_without_google_auth_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "google_auth_available", lambda: False)
    with pytest.raises(PermanentCloudError, match="google-auth, which is not installed"):
        ApplicationDefaultCredentials()
    with pytest.raises(PermanentCloudError, match="google-auth"):
        token_provider_from_env({}, adc=True)


async def test_adc_through_a_google_auth_shaped_module(monkeypatch: pytest.MonkeyPatch) -> None:
    refreshed: list[object] = []

    class Credentials:
        token: str | None = None
        expiry: dt.datetime | None = None

        def refresh(self, request: object) -> None:
            refreshed.append(request)
            self.token = SECRET
            self.expiry = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(hours=1)

    google = types.ModuleType("google")
    google_auth = types.ModuleType("google.auth")
    transport = types.ModuleType("google.auth.transport")
    requests = types.ModuleType("google.auth.transport.requests")
    scopes_seen: list[object] = []

    def default(scopes: list[str]) -> tuple[Credentials, str]:
        scopes_seen.append(scopes)
        return Credentials(), "proj-123"

    google_auth.default = default  # type: ignore[attr-defined]
    requests.Request = object  # type: ignore[attr-defined]
    for name, module in {
        "google": google,
        "google.auth": google_auth,
        "google.auth.transport": transport,
        "google.auth.transport.requests": requests,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)

    clock = Clock()
    provider = ApplicationDefaultCredentials(clock=clock)
    assert await provider.token() == SECRET
    assert scopes_seen == [[auth.CLOUD_PLATFORM_SCOPE]]
    clock.now += 3600 - auth.EXPIRY_MARGIN - 60  # still inside the margin: cached
    await provider.token()
    assert len(refreshed) == 1
    clock.now += 120  # within EXPIRY_MARGIN of expiry: refreshed
    await provider.token()
    assert len(refreshed) == 2
    assert SECRET not in repr(provider)


# --- choosing a source -----------------------------------------------------------------------


def test_factory_follows_gclouds_order(tmp_path: Path) -> None:
    path = str(tmp_path / "token")
    both = {"CLOUDSDK_AUTH_ACCESS_TOKEN": SECRET, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": path}
    assert isinstance(token_provider_from_env(both), EnvAccessToken)
    assert isinstance(
        token_provider_from_env({"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": path}, adc=True),
        AccessTokenFile,
    )
    assert isinstance(token_provider_from_env({"PATH": ""}), GcloudPrintAccessToken)
