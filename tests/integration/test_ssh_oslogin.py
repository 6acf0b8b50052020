"""OS Login user lookup: the real gcloud against a local OS Login endpoint, cached after."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters import oslogin
from reconciler.errors import SetupFailed
from tests.support.http_stub import Quiet, serving
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

PROFILE = {
    "name": "alice@example.com",
    "posixAccounts": [
        {"username": "alice_other_org", "accountId": "other"},
        {"primary": True, "username": "alice_example_com", "uid": "1001", "accountId": "p"},
    ],
}


class _Handler(Quiet):
    hits: list[str] = []
    body: bytes = b""

    def do_GET(self) -> None:
        _Handler.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


@pytest.fixture
def oslogin_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    gcloud = require_tool("gcloud")
    _Handler.hits = []
    _Handler.body = json.dumps(PROFILE).encode()
    with serving(_Handler) as port:
        yield _env(gcloud, tmp_path, port)


def _env(gcloud: str, tmp_path: Path, port: int) -> dict[str, str]:
    (tmp_path / "token").write_text("test-token\n")
    return {
        "PATH": str(Path(gcloud).parent) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": f"http://127.0.0.1:{port}/",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(tmp_path / "token"),
        "CLOUDSDK_CORE_PROJECT": "test-project-1",
        "CLOUDSDK_CORE_ACCOUNT": "alice@example.com",
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
    }


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
