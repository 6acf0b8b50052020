"""A systemd *user* unit that keeps ``tpu-reconciler run`` going: its text, install, removal.

One unit per desired file: ``tpu-reconciler@<stem>-<hash>.service`` (the same tag as the default
state directory) under ``$XDG_CONFIG_HOME/systemd/user`` (default ``~/.config/systemd/user``).
Its ``ExecStart`` names the interpreter that ran ``install`` and absolute paths, so the unit runs
the same code on the same file whatever the service manager's working directory and PATH.

Restart policy: ``Restart=on-failure`` with a pause, a start limit so a crash loop ends in
"failed" instead of spinning, and no restart at all on the exit codes that mean "this
configuration cannot run" (``RestartPreventExitStatus``: 2, a usage error in the unit; 78,
EX_CONFIG). An *invalid desired.yaml* is not among them: ``run`` keeps the last valid intent (or
waits for a valid file) and never exits for it.

``KillMode=process``: stopping the unit signals only the controller, which drains its own
children; a tmux server it started keeps running, because the controller never closes a
window (and stopping the service must not either).

``unit_text`` is pure. May (the rest): write and remove the unit file, run ``systemctl --user``
and the interpreter (argument lists, timeouts). May not: write anything secret into the unit
(it is 0644): ``CLOUDSDK_AUTH_ACCESS_TOKEN`` is never carried over.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from reconciler.adapters.files import atomic_write
from reconciler.errors import ServiceError
from reconciler.exitcodes import EX_CONFIG, EX_USAGE

RESTART_SEC: Final = 15
START_LIMIT_INTERVAL: Final = 900
START_LIMIT_BURST: Final = 5
MARKER: Final = "# Written by `tpu-reconciler service install`"
#: Environment carried from the installing shell into the unit: paths, endpoints and gcloud
#: settings, never a secret. Every ``CLOUDSDK_API_ENDPOINT_OVERRIDES_*`` goes too: a unit
#: installed from the demo's shell that kept only the TPU one would send its OS Login lookup to
#: the real Google service.
CARRIED_ENV: Final = (
    "PATH",
    "CLOUDSDK_CONFIG",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    "CLOUDSDK_CORE_ACCOUNT",
    "CLOUDSDK_CORE_PROJECT",
    "CLOUDSDK_CORE_CHECK_GCE_METADATA",
    "CLOUDSDK_CORE_DISABLE_PROMPTS",
    "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING",
    "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK",
    "CLOUDSDK_METRICS_ENVIRONMENT",
)
CARRIED_PREFIXES: Final = ("CLOUDSDK_API_ENDPOINT_OVERRIDES_",)
SYSTEMCTL_TIMEOUT: Final = 30.0


def instance_name(desired_file: Path) -> str:
    """``<stem>-<8 hex of the absolute path>``: the default state directory's name too."""
    absolute = desired_file.expanduser().resolve()
    tag = hashlib.sha256(str(absolute).encode()).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", absolute.stem).strip("-.") or "desired"
    return f"{stem[:40]}-{tag}"


def unit_name(instance: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", instance):
        raise ServiceError(f"invalid unit instance name {instance!r}: letters, digits, _ . -")
    return f"tpu-reconciler@{instance}.service"


def unit_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "systemd" / "user"


@dataclass(frozen=True, slots=True)
class UnitSpec:
    python: str  # absolute interpreter path
    desired_file: Path  # absolute
    state_dir: Path  # absolute
    environment: Mapping[str, str] = field(default_factory=dict)
    pythonpath: str | None = None  # set when the interpreter cannot import this package alone
    shared: bool = False  # a lab's controller: the group reads what it creates (UMask 0027)


def _plain(value: str, what: str) -> str:
    if any(c in value for c in "\n\r\x00"):
        raise ServiceError(f"{what} contains a line break or NUL: {value!r}")
    return value.replace("%", "%%")  # systemd expands %-specifiers nearly everywhere


def _quoted(value: str, what: str) -> str:
    """One word for ExecStart=/Environment=: C-style quoting, specifiers and $ escaped."""
    text = _plain(value, what).replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    if text and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", text):
        return text
    return f'"{text}"'


def exec_start(spec: UnitSpec) -> Sequence[str]:
    return (
        spec.python,
        "-m",
        "reconciler",
        "-f",
        str(spec.desired_file),
        "--state-dir",
        str(spec.state_dir),
        "run",
    )


def unit_text(spec: UnitSpec) -> str:
    """The unit file. Pure: everything it names comes from ``spec``."""
    for p in (spec.python, str(spec.desired_file), str(spec.state_dir)):
        if not p.startswith("/"):
            raise ServiceError(f"the unit needs absolute paths, got {p!r}")
    env = {**spec.environment, "PYTHONUNBUFFERED": "1"}
    if spec.pythonpath:
        env["PYTHONPATH"] = spec.pythonpath
    env_lines = [
        f"Environment={_quoted(f'{k}={v}', 'environment')}" for k, v in sorted(env.items())
    ]
    command = " ".join(_quoted(a, "command") for a in exec_start(spec))
    return "\n".join(
        [
            f"{MARKER}; re-run it to update this file,",
            "# `tpu-reconciler service uninstall` to remove it. Local changes belong in a drop-in",
            "# (systemctl --user edit UNIT), e.g. Environment=SSH_AUTH_SOCK=... for bootstrap.",
            "[Unit]",
            f"Description=tpu-reconciler: keep {_plain(str(spec.desired_file), 'path')} true",
            "Documentation=man:systemd.service(5)",
            f"StartLimitIntervalSec={START_LIMIT_INTERVAL}",
            f"StartLimitBurst={START_LIMIT_BURST}",
            "",
            "[Service]",
            "Type=exec",
            f"ExecStart={command}",
            f"WorkingDirectory={_plain(str(spec.desired_file.parent), 'path')}",
            *env_lines,
            "Restart=on-failure",
            f"RestartSec={RESTART_SEC}",
            f"# {EX_USAGE}: a usage error in this unit; {EX_CONFIG} (EX_CONFIG): `run` refused to "
            "start on a",
            "# configuration it cannot run with. Restarting cannot fix either.",
            f"RestartPreventExitStatus={EX_USAGE} {EX_CONFIG}",
            "# Only the controller is signalled; it stops its own children. A tmux server it",
            "# started must outlive it: windows are never closed by tpu-reconciler.",
            "KillMode=process",
            "TimeoutStopSec=90",
            f"UMask={'0027' if spec.shared else '0077'}",
            "NoNewPrivileges=yes",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


# --- I/O ---------------------------------------------------------------------------------------


def carried_environment(env: Mapping[str, str]) -> dict[str, str]:
    carried = {k: env[k] for k in CARRIED_ENV if env.get(k)}
    carried |= {k: v for k, v in env.items() if k.startswith(CARRIED_PREFIXES) and v}
    return dict(sorted(carried.items()))


def package_root() -> Path:
    """The directory holding the ``reconciler`` package."""
    return Path(__file__).resolve().parents[2]


def pythonpath_for(python: str, env: Mapping[str, str]) -> str | None:
    """None when ``python`` alone (cwd /, no PYTHONPATH) imports this very package; else the
    directory to put on PYTHONPATH (a source checkout that was never installed)."""
    clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    try:
        found = subprocess.run(
            [python, "-c", "import reconciler; print(reconciler.__file__)"],
            cwd="/",
            env=clean,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return str(package_root())
    here = package_root() / "reconciler" / "__init__.py"
    if found.returncode == 0 and Path(found.stdout.strip()).resolve() == here:
        return None
    return str(package_root())


Change = Literal["created", "updated", "unchanged"]


def write_unit(path: Path, text: str, *, force: bool = False) -> Change:
    """Write the unit file (0644); refuses to replace a file this tool did not write."""
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError) as e:
        raise ServiceError(f"cannot read {path}: {e}") from None
    if old == text:
        return "unchanged"
    if old is not None and MARKER not in old and not force:
        raise ServiceError(
            f"{path} exists and was not written by tpu-reconciler; --force replaces it"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o644)
    return "created" if old is None else "updated"


def remove_unit(path: Path, *, force: bool = False) -> bool:
    """Remove the unit file (and a stale enablement link); False when there was none."""
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    if MARKER not in old and not force:
        raise ServiceError(f"{path} was not written by tpu-reconciler; --force removes it")
    path.unlink()
    link = path.parent / "default.target.wants" / path.name
    if link.is_symlink():
        link.unlink()
    return True


def systemctl_path(env: Mapping[str, str]) -> str | None:
    return shutil.which("systemctl", path=env.get("PATH"))


def systemctl(systemctl_bin: str, args: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    """``systemctl --user ARGS``: exit code and output (stdout, then stderr)."""
    try:
        done = subprocess.run(
            [systemctl_bin, "--user", *args],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, f"systemctl --user {' '.join(args)} timed out after {SYSTEMCTL_TIMEOUT:g}s"
    except OSError as e:
        return -1, f"cannot run systemctl: {e.strerror or e}"
    return done.returncode, (done.stdout + done.stderr).strip()


SHOWN: Final = ("LoadState", "ActiveState", "SubState", "UnitFileState", "MainPID", "NRestarts")


def unit_state(systemctl_bin: str, unit: str, env: Mapping[str, str]) -> dict[str, str] | str:
    """``systemctl --user show`` properties, or why they could not be had."""
    rc, out = systemctl(systemctl_bin, ["show", unit, f"--property={','.join(SHOWN)}"], env)
    if rc != 0:
        return out or f"systemctl exited {rc}"
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {k: props.get(k, "") for k in SHOWN}
