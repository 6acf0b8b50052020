"""Credentials with their real code paths: the installed gcloud's ``config config-helper`` and
google-auth's own ADC, each talking to a local token endpoint or metadata server stand-in, and
the quota-project header as the emulator sees it.

Nothing here reaches Google: gcloud gets a throwaway ``CLOUDSDK_CONFIG`` holding a service
account whose ``token_uri`` is the local endpoint; google-auth gets a service-account file
with the same, an authorized-user file (whose ``token_uri`` google-auth ignores: it carries a
valid token instead), or ``GCE_METADATA_HOST`` / ``GCE_METADATA_IP`` pointing at the local
metadata server (read by google-auth at import, so that case runs in a fresh interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from reconciler.adapters.auth import (
    EXPIRY_MARGIN,
    ApplicationDefaultCredentials,
    GcloudAccessToken,
    choose_quota_project,
)
from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.rest import RestCloud
from reconciler.emulator import Emulator
from reconciler.errors import PermanentCloudError
from tests.support.cli import ROOT, run_cli
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration


class TokenServer:
    """A local OAuth token endpoint and GCE metadata server. Every token it hands out is new
    (``ya29.local-N``) and lives ``expires_in`` seconds."""

    def __init__(self) -> None:
        self.expires_in = 3600
        self.seen: list[tuple[str, str, dict[str, str]]] = []  # (method, path, form/query)
        self._n = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any, flavor: bool = False) -> None:
                raw = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                ctype = "application/json" if not isinstance(body, str) else "text/plain"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(raw)))
                if flavor:
                    self.send_header("Metadata-Flavor", "Google")
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                outer.seen.append(("POST", self.path, form))
                self._answer(200, outer.token())

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                outer.seen.append(("GET", parts.path, dict(parse_qsl(parts.query))))
                if self.headers.get("Metadata-Flavor") != "Google":
                    self._answer(403, "Missing Metadata-Flavor header")
                    return
                base = "/computeMetadata/v1/"
                path = parts.path
                if path in ("", "/"):
                    self._answer(200, "computeMetadata/", flavor=True)
                elif path == base + "instance/service-accounts/default/token":
                    self._answer(200, outer.token(), flavor=True)
                elif path.startswith(base + "instance/service-accounts/default"):
                    info = {
                        "email": "vm@proj-a.iam.gserviceaccount.com",
                        "aliases": ["default"],
                        "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
                    }
                    self._answer(200, info, flavor=True)
                elif path == base + "project/project-id":
                    self._answer(200, "proj-a", flavor=True)
                elif path == base + "universe/universe-domain":
                    self._answer(200, "googleapis.com", flavor=True)
                else:
                    self._answer(404, "not found", flavor=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def token(self) -> dict[str, Any]:
        self._n += 1
        return {"access_token": f"ya29.local-{self._n}", "expires_in": self.expires_in,
                "token_type": "Bearer"}  # fmt: skip

    def posts(self) -> int:
        return sum(1 for method, _, _ in self.seen if method == "POST")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def tokens() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.close()


class Wall:
    """Real time plus an offset: our provider's view of the clock, moved forward by tests."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _private_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "GOOGLE_", "GCE_"))
    }
    config = tmp_path / "gcloud-config"
    config.mkdir()
    env.update(CLOUDSDK_CONFIG=str(config), HOME=str(tmp_path), NO_PROXY="127.0.0.1")
    env["CLOUDSDK_CORE_DISABLE_PROMPTS"] = "1"
    return env


# --- gcloud config config-helper, the real one ------------------------------------------------


async def test_real_gcloud_token_near_expiry_is_refreshed_before_use(
    tokens: TokenServer, tmp_path: Path
) -> None:
    gcloud = require_tool("gcloud")
    env = _isolated_env(tmp_path)
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({
        "type": "service_account", "project_id": "proj-a", "private_key_id": "k1",
        "private_key": _private_key(), "client_email": "sa@proj-a.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": f"{tokens.url}/token",
    }), encoding="utf-8")  # fmt: skip
    tokens.expires_in = EXPIRY_MARGIN + 30  # 5.5 minutes: gcloud's --min-expiry=6m refreshes
    subprocess.run(
        [gcloud, "auth", "activate-service-account", f"--key-file={key_file}", "--quiet"],
        env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    wall = Wall()
    provider = GcloudAccessToken(env, gcloud=gcloud, wall=wall)
    first = await provider.token()
    assert first.startswith("ya29.local-")
    posts = tokens.posts()
    assert await provider.token() == first  # 30 s left before the margin: kept, no gcloud run
    assert provider.fetches == 1

    wall.offset = 60.0  # a minute later the token is inside the five-minute margin
    second = await provider.token()
    assert second != first, "a token near expiry must be refreshed before it is used"
    assert provider.fetches == 2
    assert tokens.posts() > posts  # gcloud itself went to the token endpoint
    # a service account: no X-Goog-User-Project unless one is configured (gcloud's rule)
    assert choose_quota_project(None, provider.quota, "proj-a").project is None
    assert choose_quota_project("qp-1", provider.quota, "proj-a").project == "qp-1"


async def test_real_gcloud_not_logged_in_is_permanent(tmp_path: Path) -> None:
    gcloud = require_tool("gcloud")
    provider = GcloudAccessToken(_isolated_env(tmp_path), gcloud=gcloud)
    with pytest.raises(PermanentCloudError, match="config-helper failed") as refused:
        await provider.token()
    assert refused.value.status == "UNAUTHENTICATED"


def test_not_logged_in_says_gcloud_s_advice_whole_through_the_cli(tmp_path: Path) -> None:
    """gcloud's "Please run:" paragraph goes on with its command and the sentence after it,
    never cut at the colon and spliced with another hint."""
    require_tool("gcloud")
    (tmp_path / "desired.yaml").write_text(
        "project: my-project\n"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held}\n"
    )
    env = {**_isolated_env(tmp_path), "PYTHONPATH": str(ROOT)}
    env["CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU"] = "http://127.0.0.1:9/"  # never Google
    done = run_cli("-f", str(tmp_path / "desired.yaml"), "--state-dir", str(tmp_path / "s"),
                   "plan", env=env, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "You do not currently have an active account selected. Please run: "
        "`gcloud auth login` to obtain new credentials."
    ), done.stderr
    assert "(run `gcloud" not in done.stderr and "\n" not in done.stderr.strip()


# --- google-auth's ADC, the real code -----------------------------------------------------------


async def test_adc_service_account_file_refreshes_at_its_token_uri_before_expiry(
    tokens: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({
        "type": "service_account", "project_id": "proj-a", "private_key_id": "k1",
        "private_key": _private_key(), "client_email": "ctl@proj-a.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": f"{tokens.url}/token",
    }), encoding="utf-8")  # fmt: skip
    _only_adc_env(monkeypatch, key_file)
    wall = Wall()
    provider = ApplicationDefaultCredentials(wall=wall)
    first = await provider.token()
    assert first == "ya29.local-1"
    (method, path, form) = tokens.seen[-1]
    assert (method, path) == ("POST", "/token")
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert await provider.token() == first  # cached: no second request
    assert tokens.posts() == 1
    wall.offset = 3600 - EXPIRY_MARGIN + 1  # inside the margin: refreshed before use
    assert await provider.token() == "ya29.local-2"
    assert tokens.posts() == 2
    assert provider.quota.user is False
    assert choose_quota_project(None, provider.quota, "proj-a").project is None


async def test_adc_authorized_user_file_is_a_users_with_its_quota_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """google-auth (2.x here) ignores an authorized-user file's ``token_uri`` (it always
    refreshes at oauth2.googleapis.com), so this file carries a still-valid token and no
    refresh is needed: loading, the quota project and the kind of account are google-auth's."""
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    creds = tmp_path / "adc.json"
    creds.write_text(json.dumps({
        "type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
        "client_secret": "not-secret", "refresh_token": "1//refresh-me",
        "token": "ya29.cached-in-file", "expiry": expiry, "quota_project_id": "qp-from-file",
    }), encoding="utf-8")  # fmt: skip
    _only_adc_env(monkeypatch, creds)
    provider = ApplicationDefaultCredentials()
    assert await provider.token() == "ya29.cached-in-file"
    assert provider.quota.user is True
    choice = choose_quota_project(None, provider.quota, "proj-a")
    assert (choice.project, choice.source) == ("qp-from-file", "the credentials' quota_project_id")
    assert choose_quota_project("billing-p", provider.quota, "proj-a").project == "billing-p"


def _only_adc_env(monkeypatch: pytest.MonkeyPatch, credentials: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("CLOUDSDK_", "GCE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


_METADATA_PROBE = """
import asyncio, json
from reconciler.adapters.auth import ApplicationDefaultCredentials, choose_quota_project
p = ApplicationDefaultCredentials()
token = asyncio.run(p.token())
choice = choose_quota_project(None, p.quota, "proj-a")
print(json.dumps({"token": token, "user": p.quota.user, "quota": choice.project}))
"""


def test_adc_metadata_server_through_gce_metadata_host(tokens: TokenServer, tmp_path: Path) -> None:
    env = _isolated_env(tmp_path)
    host = f"127.0.0.1:{tokens.port}"
    env.update(GCE_METADATA_HOST=host, GCE_METADATA_IP=host, PYTHONPATH=os.getcwd())
    done = subprocess.run(
        [sys.executable, "-c", _METADATA_PROBE],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["token"].startswith("ya29.local-")
    # the VM's service account: no quota header of its own
    assert (answer["user"], answer["quota"]) == (False, None)
    token_gets = [s for s in tokens.seen if s[1].endswith("/service-accounts/default/token")]
    assert token_gets, tokens.seen
    assert "cloud-platform" in token_gets[-1][2].get("scopes", "")


# --- the header on the wire -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "env_quota", "expected"),
    [(None, None, "test-project"), ("billing-proj", None, "billing-proj"),
     (None, "quota-env-proj", "quota-env-proj")],
)  # fmt: skip
async def test_requests_seen_by_the_emulator_carry_the_quota_project(
    emulator: Emulator,
    tmp_path: Path,
    setting: str | None,
    env_quota: str | None,
    expected: str,
) -> None:
    token = tmp_path / "token"
    token.write_text("emulator-token\n", encoding="utf-8")
    env = {"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token), "PATH": os.environ.get("PATH", "")}
    if env_quota:
        env["CLOUDSDK_BILLING_QUOTA_PROJECT"] = env_quota
    async with RestCloud(
        "test-project", endpoint=emulator.url, env=env, quota_project=setting
    ) as cloud:
        await cloud.observe(None)
        assert cloud.quota_choice().project == expected
    seen = emulator.requests()
    assert seen and all(r.user_project == expected for r in seen)


async def test_gcloud_backend_passes_billing_project_and_gcloud_sends_it(
    emulator: Emulator, gcloud_env: dict[str, str]
) -> None:
    gcloud = require_tool("gcloud")
    cloud = GcloudCloud("test-project", gcloud=gcloud, env=gcloud_env, quota_project="bill-proj")
    try:
        await cloud.observe(["us-central2-b"])
    finally:
        await cloud.aclose()
    seen = emulator.requests()
    assert seen and all(r.user_project == "bill-proj" for r in seen)
