"""Token providers: where the REST backend's bearer token comes from, and how it is kept."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import stat
from pathlib import Path

import pytest

from reconciler.adapters import auth
from reconciler.adapters.auth import (
    AccessTokenFile,
    ApplicationDefaultCredentials,
    EnvAccessToken,
    GcloudAccessToken,
    QuotaHint,
    choose_quota_project,
    keep_until,
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


# --- gcloud (stand-ins for its failure modes; the real gcloud: tests/integration/test_credentials)


def helper_json(token: str = SECRET, expiry: str | None = None, **props: object) -> str:
    """What ``gcloud config config-helper --format=json`` prints (shape measured on the real
    gcloud: configuration.properties, credential.{access_token, id_token, token_expiry})."""
    doc = {
        "configuration": {"active_configuration": "default", "properties": props},
        "credential": {"access_token": token, "id_token": None, "token_expiry": expiry},
        "sentinels": {"config_sentinel": "/dev/null"},
    }
    return json.dumps(doc)


def stand_in(tmp_path: Path, doc: str, before: str = "") -> tuple[Path, Path]:
    out = tmp_path / "helper.json"
    out.write_text(doc, encoding="utf-8")
    return fake_gcloud(tmp_path, f"{before}cat {out}")


async def test_config_helper_token_is_kept_until_five_minutes_before_its_expiry(
    tmp_path: Path,
) -> None:
    wall = Clock()
    expiry = dt.datetime.fromtimestamp(wall.now + 3600, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    gcloud, calls = stand_in(tmp_path, helper_json(expiry=expiry))
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud), wall=wall)
    assert await provider.token() == SECRET
    wall.now += 3600 - auth.EXPIRY_MARGIN - 1
    await provider.token()
    assert provider.fetches == 1
    wall.now += 2  # inside the margin: fetched again (gcloud refreshes, --min-expiry says so)
    await provider.token()
    assert provider.fetches == 2
    provider.invalidate()  # the 401 safety net
    await provider.token()
    assert provider.fetches == 3
    expected = "config config-helper --format=json --min-expiry=360s stdin=[]"
    assert calls.read_text().splitlines() == [expected] * 3
    assert SECRET not in repr(provider)


async def test_a_token_without_expiry_is_kept_at_most_the_ttl(tmp_path: Path) -> None:
    wall = Clock()
    gcloud, _ = stand_in(tmp_path, helper_json(expiry=None))
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud), wall=wall)
    await provider.token()
    wall.now += auth.GCLOUD_TOKEN_TTL - 1
    await provider.token()
    assert provider.fetches == 1
    wall.now += 2
    await provider.token()
    assert provider.fetches == 2


async def test_concurrent_callers_share_one_gcloud_run(tmp_path: Path) -> None:
    gcloud, calls = stand_in(tmp_path, helper_json(), before="sleep 0.2; ")
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    tokens = await asyncio.gather(*(provider.token() for _ in range(5)))
    assert tokens == [SECRET] * 5
    assert len(calls.read_text().splitlines()) == 1


async def test_gcloud_found_on_the_path_given(tmp_path: Path) -> None:
    stand_in(tmp_path, helper_json())
    provider = GcloudAccessToken({"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert await provider.token() == SECRET


async def test_gcloud_missing_is_permanent_and_names_the_ways_out(tmp_path: Path) -> None:
    provider = GcloudAccessToken({"PATH": str(tmp_path)})
    with pytest.raises(PermanentCloudError, match=r"credentials: adc.*CLOUDSDK_AUTH_ACCESS_TOKEN"):
        await provider.token()


@pytest.mark.parametrize("printed", ["not json", "{}", '{"credential": {"access_token": ""}}'])
async def test_config_helper_without_a_token(tmp_path: Path, printed: str) -> None:
    gcloud, _ = stand_in(tmp_path, printed)
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    with pytest.raises((TransientCloudError, PermanentCloudError)) as caught:
        await provider.token()
    assert caught.value.status == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (
            "ERROR: (gcloud.config.config-helper) You do not currently have an active "
            "account selected.",
            PermanentCloudError,
        ),
        (
            "ERROR: There was a problem refreshing your current auth tokens: "
            "Failed to establish a new connection",
            TransientCloudError,
        ),
        (  # the cause first, then gcloud's boilerplate: the cause decides
            "ERROR: gcloud crashed (ConnectionError): NameResolutionError: Failed to resolve\n"
            "\nIf you would like to report this issue, please run the following command:\n"
            "  gcloud feedback\n\nTo check gcloud for common problems, please run the "
            "following command:\n  gcloud info --run-diagnostics\n",
            TransientCloudError,
        ),
    ],
)
async def test_gcloud_failures_not_logged_in_permanent_network_transient(
    tmp_path: Path, stderr: str, kind: type[Exception]
) -> None:
    gcloud, _ = fake_gcloud(tmp_path, f"echo '{stderr}' >&2; exit 1")
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    with pytest.raises(kind, match="config config-helper failed: ERROR"):
        await provider.token()


async def test_a_hanging_gcloud_times_out_transiently(tmp_path: Path) -> None:
    gcloud, _ = fake_gcloud(tmp_path, f"sleep 30; echo {SECRET}")
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud), timeout=0.3)
    with pytest.raises(TransientCloudError, match="timed out"):
        await provider.token()


# --- the quota project -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "hint", "expected"),
    [
        ("billing-p", QuotaHint("other", "x", False), ("billing-p", "settings.quota_project")),
        (None, QuotaHint("qp-1", "gcloud billing/quota_project", True), ("qp-1", "gcloud")),
        (None, QuotaHint("qp-1", "gcloud billing/quota_project", False), ("qp-1", "gcloud")),
        (None, QuotaHint("CURRENT_PROJECT", "gcloud", True), ("proj-a", "the project")),
        (None, QuotaHint(None, "", True), ("proj-a", "the project")),
        (None, QuotaHint(None, "", None), ("proj-a", "the project")),
        (None, QuotaHint("CURRENT_PROJECT", "gcloud", False), (None, "none: a service")),
        (None, QuotaHint(None, "", False), (None, "none: a service")),
        (None, QuotaHint("LEGACY", "gcloud billing/quota_project", True), (None, "none: ")),
    ],
)
def test_quota_project_follows_gclouds_rule(
    setting: str | None, hint: QuotaHint, expected: tuple[str | None, str]
) -> None:
    choice = choose_quota_project(setting, hint, "proj-a")
    assert choice.project == expected[0]
    assert choice.source.startswith(expected[1])


async def test_config_helper_tells_the_quota_project_and_the_kind_of_account(
    tmp_path: Path,
) -> None:
    sa = helper_json(core={"account": "sa@p.iam.gserviceaccount.com"})
    gcloud, _ = stand_in(tmp_path, sa)
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    await provider.token()
    assert choose_quota_project(None, provider.quota, "proj-a").project is None
    user = helper_json(core={"account": "me@example.com"}, billing={"quota_project": "qp-9"})
    (tmp_path / "helper.json").write_text(user, encoding="utf-8")
    provider = GcloudAccessToken({"PATH": "/usr/bin:/bin"}, gcloud=str(gcloud))
    await provider.token()
    assert choose_quota_project(None, provider.quota, "proj-a").project == "qp-9"


def test_bare_tokens_take_the_quota_project_from_gclouds_environment_variable() -> None:
    env = {"CLOUDSDK_BILLING_QUOTA_PROJECT": "qp-env"}
    assert choose_quota_project(None, EnvAccessToken(SECRET, env).quota, "p").project == "qp-env"
    assert choose_quota_project(None, EnvAccessToken(SECRET).quota, "proj-a").project == "proj-a"


# --- choosing a source -----------------------------------------------------------------------


def test_factory_follows_gclouds_order(tmp_path: Path) -> None:
    path = str(tmp_path / "token")
    both = {"CLOUDSDK_AUTH_ACCESS_TOKEN": SECRET, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": path}
    assert isinstance(token_provider_from_env(both), EnvAccessToken)
    assert isinstance(
        token_provider_from_env({"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": path}, adc=True),
        AccessTokenFile,
    )
    fake_gcloud(tmp_path, "true")
    with_gcloud = {"PATH": str(tmp_path)}
    assert isinstance(token_provider_from_env(with_gcloud), GcloudAccessToken)
    assert isinstance(token_provider_from_env(with_gcloud, adc=True), ApplicationDefaultCredentials)
    # no gcloud installed: ADC without being asked
    assert isinstance(token_provider_from_env({"PATH": ""}), ApplicationDefaultCredentials)


def test_adc_without_google_auth_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "google_auth_available", lambda: False)
    with pytest.raises(PermanentCloudError, match="google-auth"):
        ApplicationDefaultCredentials()


def test_a_token_inside_the_margin_is_kept_briefly_not_fetched_per_request() -> None:
    now = 1_000_000.0
    assert keep_until(now + 3600, now) == now + 3600 - auth.EXPIRY_MARGIN
    assert keep_until(now + 120, now) == now + auth.MIN_KEEP  # inside the margin: 30 s
    assert keep_until(now + 20, now) == now + 20 - auth.LAST_SECONDS  # never its last 10 s
    assert keep_until(now - 1, now) < now  # expired: fetched at once


def test_no_application_default_credentials_at_all_is_permanent(tmp_path: Path) -> None:
    """google-auth's own search (no GOOGLE_APPLICATION_CREDENTIALS, no gcloud ADC file, a
    metadata server that refuses on loopback) ends in DefaultCredentialsError: that is no
    transient failure to retry every 30 s but a configuration to fix, said once."""
    import os
    import subprocess
    import sys

    code = (
        "import asyncio\n"
        "from reconciler.adapters.auth import ApplicationDefaultCredentials\n"
        "from reconciler.errors import PermanentCloudError\n"
        "try:\n"
        "    asyncio.run(ApplicationDefaultCredentials().token())\n"
        "except PermanentCloudError as e:\n"
        "    print('permanent:', e)\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_")) and k != "NO_GCE_CHECK"
    }
    env.update(
        CLOUDSDK_CONFIG=str(tmp_path), HOME=str(tmp_path), GCE_METADATA_HOST="127.0.0.1:9",
        GCE_METADATA_IP="127.0.0.1:9", PYTHONPATH=os.getcwd(),
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("permanent: Application Default Credentials not found"), (
        done.stdout + done.stderr
    )
