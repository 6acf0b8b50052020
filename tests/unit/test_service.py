"""The systemd user unit: its text (quoting, restart policy), install/uninstall of the file, and
``systemd-analyze verify`` on what install writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.runtime import service as s


def spec(tmp_path: Path, **kw: object) -> s.UnitSpec:
    args: dict[str, object] = {
        "python": sys.executable,
        "desired_file": tmp_path / "desired.yaml",
        "state_dir": tmp_path / "state",
        "environment": {"PATH": "/usr/bin:/bin"},
    }
    args.update(kw)
    return s.UnitSpec(**args)  # type: ignore[arg-type]


def test_exec_start_and_restart_policy(tmp_path: Path) -> None:
    text = s.unit_text(spec(tmp_path))
    assert (
        f"ExecStart={sys.executable} -m reconciler -f {tmp_path}/desired.yaml "
        f"--state-dir {tmp_path}/state run\n"
    ) in text
    for line in (
        "Restart=on-failure",
        "RestartSec=15",
        "RestartPreventExitStatus=2 78",
        "StartLimitIntervalSec=900",
        "StartLimitBurst=5",
        "KillMode=process",
        "WantedBy=default.target",
        "Environment=PATH=/usr/bin:/bin",
        "Environment=PYTHONUNBUFFERED=1",
    ):
        assert f"\n{line}\n" in text
    assert "PYTHONPATH" not in text
    assert "Environment=PYTHONPATH=/src\n" in s.unit_text(spec(tmp_path, pythonpath="/src"))


def test_paths_with_spaces_percent_and_dollar_are_quoted(tmp_path: Path) -> None:
    odd = tmp_path / 'my tpus 100% $HOME "x"'
    text = s.unit_text(spec(tmp_path, desired_file=odd / "d.yaml", state_dir=odd / "st"))
    assert f'-f "{tmp_path}/my tpus 100%% $$HOME \\"x\\"/d.yaml"' in text
    assert f'WorkingDirectory={tmp_path}/my tpus 100%% $HOME "x"' in text


def test_refuses_relative_paths_and_line_breaks(tmp_path: Path) -> None:
    with pytest.raises(s.ServiceError, match="absolute"):
        s.unit_text(spec(tmp_path, desired_file=Path("desired.yaml")))
    with pytest.raises(s.ServiceError, match="line break"):
        s.unit_text(spec(tmp_path, desired_file=tmp_path / "a\nb.yaml"))


def test_no_secret_is_carried_into_the_unit() -> None:
    env = {"PATH": "/bin", "CLOUDSDK_AUTH_ACCESS_TOKEN": "ya29.secret", "HOME": "/h"}
    assert s.carried_environment(env) == {"PATH": "/bin"}


def test_instance_and_unit_names(tmp_path: Path) -> None:
    name = s.instance_name(tmp_path / "my desired!.yaml")
    assert name.startswith("my-desired-") and len(name.rsplit("-", 1)[1]) == 8
    assert s.unit_name(name) == f"tpu-reconciler@{name}.service"
    with pytest.raises(s.ServiceError):
        s.unit_name("../etc")


def test_unit_dir_respects_xdg_config_home() -> None:
    assert s.unit_dir({"XDG_CONFIG_HOME": "/c", "HOME": "/h"}) == Path("/c/systemd/user")
    assert s.unit_dir({"HOME": "/h"}) == Path("/h/.config/systemd/user")


def test_write_and_remove_own_files_only(tmp_path: Path) -> None:
    unit = tmp_path / "user" / "tpu-reconciler@x.service"
    text = s.unit_text(spec(tmp_path))
    assert s.write_unit(unit, text) == "created"
    assert unit.stat().st_mode & 0o777 == 0o644
    assert s.write_unit(unit, text) == "unchanged"
    assert s.write_unit(unit, text + "# more\n") == "updated"
    wants = unit.parent / "default.target.wants"
    wants.mkdir()
    (wants / unit.name).symlink_to(unit)
    assert s.remove_unit(unit) is True
    assert not unit.exists() and not (wants / unit.name).is_symlink()
    assert s.remove_unit(unit) is False

    unit.write_text("[Service]\nExecStart=/bin/true\n")
    with pytest.raises(s.ServiceError, match="not written by tpu-reconciler"):
        s.write_unit(unit, text)
    with pytest.raises(s.ServiceError, match="not written by tpu-reconciler"):
        s.remove_unit(unit)
    assert s.write_unit(unit, text, force=True) == "updated"


def test_pythonpath_only_when_the_interpreter_cannot_import_this_package() -> None:
    assert s.pythonpath_for(sys.executable, dict(os.environ)) in (None, str(s.package_root()))
    bare = shutil.which("python3", path="/usr/bin:/bin")
    if bare is None or Path(bare).resolve() == Path(sys.executable).resolve():
        pytest.skip("no second interpreter to compare with")
    assert s.pythonpath_for(bare, {"PATH": "/usr/bin:/bin"}) == str(s.package_root())


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed (apt-get install systemd)")
    (tmp_path / "desired.yaml").write_text("project: my-project\n")
    unit = tmp_path / "tpu-reconciler@desired-0123abcd.service"
    unit.write_text(s.unit_text(spec(tmp_path, environment={"PATH": os.environ["PATH"]})))
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    # verify only warns (exit 0) about unknown keys: none may be reported for this file.
    assert unit.name not in done.stderr, done.stderr


def test_every_endpoint_override_and_gcloud_setting_is_carried() -> None:
    """A unit installed from the demo's shell keeps every override: with only the TPU one, its
    OS Login lookup went to the real Google service."""
    env = {
        "PATH": "/bin",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": "http://127.0.0.1:1/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": "http://127.0.0.1:1/",
        "CLOUDSDK_CORE_ACCOUNT": "demo-user@example.com",
        "CLOUDSDK_CORE_CHECK_GCE_METADATA": "false",
        "CLOUDSDK_AUTH_ACCESS_TOKEN": "ya29.secret",
    }
    carried = s.carried_environment(env)
    assert carried == {k: v for k, v in env.items() if k != "CLOUDSDK_AUTH_ACCESS_TOKEN"}


def test_emulator_and_demo_settings_are_found_and_real_ones_are_not() -> None:
    from pathlib import PurePath

    from reconciler.runtime.service_env import emulator_settings

    real = {
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": "https://tpu.googleapis.com/",
        "CLOUDSDK_CONFIG": "/home/me/.config/gcloud",
        "CLOUDSDK_CORE_ACCOUNT": "me@gmail.com",
    }
    where = {"desired_file": PurePath("/home/me/d.yaml"), "state_dir": PurePath("/home/me/s")}
    assert emulator_settings(real, **where) == []
    local = {
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": "http://[::1]:8080/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": "http://localhost:9/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": "http://10.0.0.1/",
    }
    assert [f.split("=")[0] for f in emulator_settings(local, **where)] == [
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU",
    ]
    demo = PurePath("/tmp/tpu-reconciler-demo-x1/desired.yaml")
    found = emulator_settings({}, desired_file=demo, state_dir=PurePath("/home/me/s"))
    assert found == [f"-f {demo} (the demo's, deleted when it stops)"]
