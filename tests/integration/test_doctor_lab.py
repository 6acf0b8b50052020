"""``tpu-reconciler doctor`` for the setups that have more to check, run as the CLI against the
emulator: a shared lab's state directory holding a ``memory.json`` someone else owns (and an
inbox of the wrong mode), and
``settings.quota_source: cloud`` reading the Cloud Quotas API through the emulator (its
endpoint set by ``CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS``, as gcloud's override)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.cloud_quotas import ENDPOINT_ENV
from reconciler.adapters.lab_layout import ensure_desired_layout, ensure_lab_layout
from reconciler.adapters.statedir import StateDir
from reconciler.emulator import Emulator
from tests.fixtures.emulator import gcloud_env_for
from tests.integration.test_golden import GoldenCli
from tests.support.tools import require_root

pytestmark = pytest.mark.integration

STRANGER = 54_321  # a uid with no user behind it: shown as "uid54321"


def _setup(tmp_path: Path, emulator: Emulator, settings: str) -> tuple[GoldenCli, dict[str, str]]:
    (tmp_path / "desired.yaml").write_text(
        f"project: test-project\nsettings: {{backend: rest, {settings}}}\n"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held}\n",
        encoding="utf-8",
    )
    return GoldenCli(tmp_path), gcloud_env_for(emulator, tmp_path / "gcloud")


def _checks(stdout: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in json.loads(stdout)["checks"]}


def test_a_labs_memory_owned_by_someone_else_is_reported_with_the_fix(
    emulator: Emulator, tmp_path: Path
) -> None:
    require_root("giving a file to another user")
    cli, env = _setup(tmp_path, emulator, "ntfy_topic: tpu-3f9c2a7b1e4d8c6a5b0f9e2d")
    state = StateDir(tmp_path / "state").ensure()
    state.root.chmod(0o2770)  # a lab's (service install --shared lays it out)
    ensure_lab_layout(state)
    ensure_desired_layout(tmp_path / "desired.yaml", state.root.stat().st_gid)
    state.known_hosts.write_text("")  # the controller's own: fine
    state.memory.write_text("{}")
    os.chown(state.memory, STRANGER, -1)
    done = cli.run("--state-dir", "state", "doctor", "--json", env=env, code=1)
    checks = _checks(done.stdout)
    names = list(checks)
    assert names.index("state_files") == names.index("state_dir") + 1
    assert names.index("lab") == names.index("state_files") + 1
    assert checks["lab"]["status"] == "ok", checks["lab"]
    files = checks["state_files"]
    assert files["status"] == "fail"
    memory = "state/controller/memory.json"
    assert files["detail"].startswith(
        f"{memory} is owned by uid{STRANGER}, not by the controller's user root: "
    )
    assert files["hint"] == f"rm {memory}  (or, if you trust its content: sudo chown root {memory})"
    os.chown(state.memory, os.getuid(), -1)
    state.inbox.chmod(0o1777)
    done = cli.run("--state-dir", "state", "doctor", "--json", env=env, code=1)
    checks = _checks(done.stdout)
    assert checks["state_files"]["status"] == "ok"
    assert checks["lab"]["status"] == "fail"
    assert checks["lab"]["detail"] == "state/inbox is mode 1777, not 3730"
    assert checks["lab"]["hint"] == "chmod 3730 state/inbox"


def test_a_private_state_dir_and_quota_source_file_add_no_line(
    emulator: Emulator, tmp_path: Path
) -> None:
    cli, env = _setup(tmp_path, emulator, "ntfy_topic: tpu-3f9c2a7b1e4d8c6a5b0f9e2d")
    StateDir(tmp_path / "state").ensure()
    done = cli.cli("--state-dir", "state", "doctor", "--json", env=env)
    assert not {"state_files", "cloud_quotas"} & set(_checks(done.stdout))


def test_quota_source_cloud_asks_the_cloud_quotas_api(emulator: Emulator, tmp_path: Path) -> None:
    cli, env = _setup(tmp_path, emulator, "quota_source: cloud")
    emulator.set_quota("v6e", "spot", 16, zone="us-central2-b")
    env[ENDPOINT_ENV] = emulator.url
    done = cli.cli("--state-dir", "state", "doctor", "--json", env=env)
    checks = _checks(done.stdout)
    names = list(checks)
    assert names.index("cloud_quotas") == names.index("quota") + 1
    quotas = checks["cloud_quotas"]
    assert quotas["status"] == "ok", quotas
    assert quotas["detail"].startswith("1 Cloud TPU chip limit from the Cloud Quotas API at ")
    assert any(r.key == "GET quotaInfos.list" for r in emulator.requests())

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        env[ENDPOINT_ENV] = f"http://127.0.0.1:{s.getsockname()[1]}/"
    done = cli.run("--state-dir", "state", "doctor", env=env, code=1)
    line = next(x for x in done.stdout.splitlines() if "cloud_quotas" in x)
    assert line.startswith("FAIL  cloud_quotas  the Cloud Quotas API at http://127.0.0.1:")
    assert "cloudquotas.googleapis.com" in done.stdout  # the fix
