"""OS Login user lookup: the real gcloud against a local OS Login endpoint, cached after."""

from __future__ import annotations

import http.server
import json
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters import oslogin
from reconciler.errors import SetupFailed
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

PROFILE = {
    "name": "alice@example.com",
    "posixAccounts": [
        {"username": "alice_other_org", "accountId": "other"},
        {"primary": True, "username": "alice_example_com", "uid": "1001", "accountId": "p"},
    ],
}


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []
    body: bytes = b""

    def do_GET(self) -> None:
        _Handler.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def oslogin_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    gcloud = require_tool("gcloud")
    _Handler.hits = []
    _Handler.body = json.dumps(PROFILE).encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    (tmp_path / "token").write_text("test-token\n")
    env = {
        "PATH": str(Path(gcloud).parent) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": f"http://127.0.0.1:{server.server_port}/",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(tmp_path / "token"),
        "CLOUDSDK_CORE_PROJECT": "test-project-1",
        "CLOUDSDK_CORE_ACCOUNT": "alice@example.com",
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
    }
    try:
        yield env
    finally:
        server.shutdown()
        server.server_close()


async def test_lookup_once_then_cached(oslogin_env: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "state" / "oslogin_user"
    cache.parent.mkdir()

    assert await oslogin.resolve_user(cache, env=oslogin_env) == "alice_example_com"
    assert await oslogin.resolve_user(cache, env=oslogin_env) == "alice_example_com"

    assert _Handler.hits == ["/v1/users/alice@example.com/loginProfile?alt=json"]
    assert cache.read_text() == "alice_example_com\n"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600

    cache.write_text("-rf; not a user\n")  # an invalid cache is looked up again
    assert await oslogin.resolve_user(cache, env=oslogin_env) == "alice_example_com"
    assert len(_Handler.hits) == 2


async def test_profile_without_accounts_is_a_setup_failure(
    oslogin_env: dict[str, str], tmp_path: Path
) -> None:
    _Handler.body = json.dumps({"name": "x"}).encode()
    with pytest.raises(SetupFailed, match="posixAccounts"):
        await oslogin.resolve_user(tmp_path / "oslogin_user", env=oslogin_env)
    assert not (tmp_path / "oslogin_user").exists()


async def test_missing_gcloud_is_a_setup_failure(tmp_path: Path) -> None:
    with pytest.raises(SetupFailed, match="cannot run"):
        await oslogin.lookup(gcloud=str(tmp_path / "no-gcloud"))
