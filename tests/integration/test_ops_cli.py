"""The operating commands as real processes: ``status --watch`` in a pty and in a pipe,
``events`` filters and ``--follow``, ``doctor`` against the emulator, ``init`` asking on a
terminal, ``service`` with a stand-in systemctl, and the completion scripts run by bash."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import termios
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.emulator import Emulator
from reconciler.model.status import STATUS_SCHEMA
from reconciler.runtime.events import EventLog
from reconciler.runtime.lock import ControllerLock
from reconciler.surfaces.cli import build_parser
from reconciler.surfaces.cli._ops_completion import command_paths
from tests.fixtures.emulator import gcloud_env_for
from tests.integration.test_golden import GoldenCli, with_fixture_state
from tests.support.cli import CLI_ARGV, clean_env
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

CLI = CLI_ARGV
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = clean_env()
    env.pop("NO_COLOR", None)
    env.update({"TERM": "xterm-256color"})
    env.update(extra or {})
    return env


class Pty:
    """The CLI on a pseudo-terminal of a given size."""

    def __init__(self, cwd: Path, args: list[str], cols: int = 120, rows: int = 40) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            [*CLI, *args],
            cwd=cwd,
            env=_env(),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""

    def expect(self, pattern: str, timeout: float = 20.0) -> str:
        """Read until ``pattern`` (a regex) appears in the ANSI-stripped output."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, ANSI.sub("", self.output)):
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {pattern!r} within {timeout}s; got:\n{self.output[-2000:]}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.output += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:  # EIO: the child closed the terminal
                    pytest.fail(f"exited before {pattern!r}:\n{self.output[-2000:]}")
        return self.output

    def answer(self, prompt: str, text: str) -> None:
        """Wait for ``prompt``, then type ``text`` and Enter."""
        self.expect(prompt)
        os.write(self.master, text.encode() + b"\r")

    def finish(self, sig: int | None = None, timeout: float = 20.0) -> int:
        if sig is not None:
            os.killpg(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            os.close(self.master)
        return code


# --- status --watch ------------------------------------------------------------------------------


@pytest.fixture
def watched(tmp_path: Path) -> GoldenCli:
    return with_fixture_state(tmp_path)


def _set_state(cli: GoldenCli, slot: str, state: str) -> None:
    path = cli.cwd / "state" / "status.json"
    doc = json.loads(path.read_text())
    for s in doc["slots"]:
        if s["name"] == slot:
            s["state"] = state
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def test_watch_in_a_terminal_redraws_in_place_in_colour_and_ends_on_ctrl_c(
    watched: GoldenCli,
) -> None:
    term = Pty(watched.cwd, ["--state-dir", "state", "status", "--watch", "--interval", "0.3"])
    out = term.expect(r"spot-v6e8-use1d-1\s+us-east1-d.*NOT_QUEUED")
    for state, colour in (
        ("ACTIVE", "32"),  # green
        ("WAITING_FOR_RESOURCES", "33"),  # yellow
        ("FAILED", "31"),  # red
        ("SUSPENDED", "31"),
        ("NOT_QUEUED", "2"),  # dim
    ):
        assert re.search(rf"\x1b\[(?:[0-9]+;)*{colour}m{state}", out), state
    _set_state(watched, "spot-v6e8-use1d-1", "PROVISIONING")
    out = term.expect(r"spot-v6e8-use1d-1\s+us-east1-d.*PROVISIONING")
    assert "\x1b[2J" not in out and "\x1b[?1049h" not in out  # no clearing, no alt screen
    assert term.finish(signal.SIGINT) == 0
    assert "Traceback" not in term.output


def test_watch_fits_a_narrow_terminal(watched: GoldenCli) -> None:
    term = Pty(watched.cwd, ["--state-dir", "state", "status", "--watch"], cols=50, rows=30)
    out = ANSI.sub("", term.expect(r"next: Plan"))
    assert term.finish(signal.SIGINT) == 0
    lines = [line for line in out.replace("\r", "\n").split("\n") if line.strip()]
    assert lines and max(len(line) for line in lines) <= 50
    assert any(line.startswith("spot-v48-usc2b-2") and "FAILED" in line for line in lines)


def piped(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """The CLI with stdout and stderr on pipes (not a terminal)."""
    return subprocess.Popen(
        [*CLI, "--state-dir", "state", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C; the exit code and stderr."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    return proc.returncode, err


def test_watch_without_a_terminal_prints_plain_blocks(watched: GoldenCli) -> None:
    proc = piped(watched.cwd, "status", "--watch", "--interval", "0.2")
    assert proc.stdout is not None
    blocks = 0
    deadline = time.monotonic() + 30
    while blocks < 2 and time.monotonic() < deadline:
        blocks += proc.stdout.readline().startswith("desired: ")
    code, err = interrupt(proc)
    assert blocks == 2 and code == 0, err


def test_watch_json_prints_a_document_per_interval(watched: GoldenCli) -> None:
    proc = piped(watched.cwd, "status", "--watch", "--json", "--interval", "0.2")
    assert proc.stdout is not None
    docs = [json.loads(proc.stdout.readline()) for _ in range(2)]
    code, err = interrupt(proc)
    assert code == 0, err
    assert [d["schema_version"] for d in docs] == ["tpu-reconciler.status.v1"] * 2


# --- events -----------------------------------------------------------------------------------


def test_events_filters(tmp_path: Path) -> None:
    cli = with_fixture_state(tmp_path)

    def seqs(*args: str) -> list[int]:
        done = cli.run("--state-dir", "state", "events", "--json", *args)
        return [json.loads(line)["seq"] for line in done.stdout.splitlines()]

    assert seqs("--slot", "spot-v48-usc2b-2") == [9, 10]
    assert seqs("--since", "2025-11-30T09:30:00Z") == [12, 13, 14]
    assert seqs("--limit", "2") == [13, 14]
    assert seqs("--slot", "spot-v6e8-ew4a-1", "--limit", "1") == [6]
    assert seqs("--since", "1h") == []
    bad = cli.run("--state-dir", "state", "events", "--since", "yesterday", code=2)
    assert "--since" in bad.stderr


def test_events_follow_prints_new_events_and_ends_on_ctrl_c(tmp_path: Path) -> None:
    cli = with_fixture_state(tmp_path)
    proc = piped(cli.cwd, "events", "--follow", "--limit", "1")
    assert proc.stdout is not None
    assert "controller.stopped" in proc.stdout.readline()  # the newest of the history
    EventLog(StateDir(cli.cwd / "state")).emit(
        "action.failed", slot="a-1", action="create", error="boom", retry="transient", delay=5
    )
    line = proc.stdout.readline()
    assert "action.failed" in line and "create failed (retry in 5s): boom" in line
    code, err = interrupt(proc)
    assert code == 0, err


# --- doctor -----------------------------------------------------------------------------------


@pytest.fixture
def healthy_setup(emulator: Emulator, tmp_path: Path) -> Iterator[tuple[GoldenCli, dict[str, str]]]:
    require_tool("tmux")
    cli = GoldenCli(tmp_path)
    key = tmp_path / "key"  # the tmux window's SSH needs one (doctor's ssh_key)
    subprocess.run([require_tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
    (tmp_path / "desired.yaml").write_text(
        "project: test-project\n"
        "settings: {backend: rest, ntfy_topic: tpu-3f9c2a7b1e4d8c6a5b0f9e2d,\n"
        f"           ssh_key: {key}}}\n"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held}\n",
        encoding="utf-8",
    )
    state = StateDir(tmp_path / "state").ensure()
    state.oslogin_user.write_text("alice_example_com\n")
    generated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    snapshot = {"schema_version": STATUS_SCHEMA, "generated_at": generated}
    state.status.write_text(json.dumps(snapshot))
    with ControllerLock(state):
        yield cli, gcloud_env_for(emulator, tmp_path / "gcloud")


def test_doctor_healthy_against_the_emulator(
    healthy_setup: tuple[GoldenCli, dict[str, str]], tmp_path: Path
) -> None:
    cli, env = healthy_setup
    done = cli.run("--state-dir", "state", "doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert {n for n, c in checks.items() if c["status"] not in ("ok", "skip")} == set()
    assert checks["tpu_api"] == {
        "name": "tpu_api",
        "status": "ok",
        "detail": "via rest: 0 queued resources seen",
        "hint": "",
    }
    assert checks["auth"]["detail"] == "access token from $CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"
    project = json.loads(done.stdout).get("project") or checks["project"]["detail"].split()[0]
    assert checks["quota"]["status"] == "ok"
    assert checks["quota"]["detail"] == (
        f"quota project {project} (the project, as for user credentials)"
    )
    assert checks["oslogin_user"]["detail"] == "alice_example_com (cached)"
    assert checks["ssh_agent"]["status"] == "skip"
    assert checks["ssh_key"]["detail"] == str(tmp_path / "key")
    assert checks["ssh_reach"]["detail"] == "no live node in the controller's snapshot to try"


def test_doctor_reports_an_api_that_refuses(
    healthy_setup: tuple[GoldenCli, dict[str, str]], tmp_path: Path
) -> None:
    cli, env = healthy_setup
    (tmp_path / "gcloud" / "gcloud-token").write_text("")  # an empty token: UNAUTHENTICATED
    done = cli.run("--state-dir", "state", "doctor", env=env, code=1)
    assert re.search(r"^FAIL  auth .*no access token", done.stdout, re.M)
    assert re.search(r"^skip  tpu_api .*see auth", done.stdout, re.M)


def test_doctor_asks_compute_engine_when_a_slot_is_held_there(
    healthy_setup: tuple[GoldenCli, dict[str, str]], tmp_path: Path
) -> None:
    cli, env = healthy_setup
    desired = tmp_path / "desired.yaml"
    desired.write_text(
        desired.read_text()
        + "  - {name: x-1, zone: us-central1-c, accelerator: tpu7x-8, want: released}\n"
    )
    done = cli.run("--state-dir", "state", "doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["compute_api"] == {
        "name": "compute_api",
        "status": "ok",
        "detail": "0 TPU VMs and MIG slices of ours seen",
        "hint": "",
    }
    names = list(checks)
    assert names.index("compute_api") == names.index("tpu_api") + 1
    with socket.socket() as s:  # a port nothing listens on: Compute Engine does not answer
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/"
    broken = {**env, "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": closed}
    done = cli.run("--state-dir", "state", "doctor", env=broken, code=1)
    assert re.search(r"^FAIL  compute_api .*listing TPU VMs on Compute Engine failed", done.stdout,
                     re.M)  # fmt: skip
    assert re.search(r"^ok    tpu_api ", done.stdout, re.M)


def test_doctor_asks_the_real_gcloud_and_ssh_agent(tmp_path: Path) -> None:
    """Real probes: ``gcloud auth list`` with an empty config (no account), and an ssh-agent
    first without keys, then with one."""
    gcloud = require_tool("gcloud")
    agent, add, keygen = (require_tool(t) for t in ("ssh-agent", "ssh-add", "ssh-keygen"))
    cli = GoldenCli(tmp_path)
    (tmp_path / "desired.yaml").write_text(
        "project: test-project\nsettings: {backend: gcloud, ssh_user: alice}\n"
        "defaults: {setup: {bootstrap: true, tmux: false}}\n"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held}\n"
    )
    sock = tmp_path / "agent.sock"
    daemon = subprocess.Popen([agent, "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = {k: "" for k in os.environ if k.startswith("CLOUDSDK_")}
        env.update(
            CLOUDSDK_CONFIG=str(tmp_path / "gcloud-config"),
            SSH_AUTH_SOCK=str(sock),
            PATH=f"{Path(gcloud).parent}:{Path(agent).parent}:/usr/bin:/bin",
        )
        (tmp_path / "gcloud-config").mkdir()

        def checks() -> dict[str, dict[str, str]]:
            done = cli.run("--state-dir", "state", "doctor", "--json", env=env, code=1)
            return {c["name"]: c for c in json.loads(done.stdout)["checks"]}

        first = checks()
        assert first["auth"]["status"] == "fail", first["auth"]
        assert first["auth"]["detail"] == "gcloud has no active account"
        assert first["tpu_api"]["status"] == "skip"
        assert first["ssh_agent"]["detail"] == "the SSH agent holds no keys"
        assert first["oslogin_user"]["status"] == "skip"  # settings.ssh_user is set
        key = tmp_path / "id"
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30
        )
        subprocess.run([add, "-q", str(key)], env=env, check=True, timeout=30)
        assert checks()["ssh_agent"] == {
            "name": "ssh_agent",
            "status": "ok",
            "detail": "1 key in the agent",
            "hint": "",
        }
    finally:
        daemon.terminate()
        daemon.wait(10)


# --- init -------------------------------------------------------------------------------------


def test_init_asks_on_a_terminal(tmp_path: Path) -> None:
    term = Pty(tmp_path, ["-f", "mine.yaml", "init"])
    term.answer(r"GCP project id", "my-project")
    term.answer(r"Zones", "us-central2-b europe-west4-a")
    term.answer(r"Accelerator types", "")
    term.answer(r"Mode", "on-demand")
    term.answer(r"Race the candidates", "n")
    term.expect(r"wrote mine.yaml: 2 slots")
    assert term.finish() == 0
    text = (tmp_path / "mine.yaml").read_text()
    assert "od-v48-usc2b-1" in text and "od-v48-ew4a-1" in text and "race_groups" not in text
    GoldenCli(tmp_path).run("-f", "mine.yaml", "validate")
    named = GoldenCli(tmp_path).run("validate", "mine.yaml")  # the file as validate's argument
    assert named.stdout == "mine.yaml: valid (2 slots, 0 race groups)\n"


def test_init_refuses_without_answers_or_over_a_file(tmp_path: Path) -> None:
    cli = GoldenCli(tmp_path)
    assert "--project" in cli.run("init", code=2).stderr
    (tmp_path / "desired.yaml").write_text("mine\n")
    assert "--force" in cli.run("init", "--project", "my-project", code=1).stderr
    assert (tmp_path / "desired.yaml").read_text() == "mine\n"
    bad = cli.run("-f", "x.yaml", "init", "--project", "my-project", "--zone", "moon", code=1)
    assert "invalid zone 'moon'" in bad.stderr and not (tmp_path / "x.yaml").exists()
    cli.run("init", "--project", "my-project", "--force")
    cli.run("validate")


# --- service ----------------------------------------------------------------------------------

FAKE_SYSTEMCTL = """\
#!/bin/sh
echo "$@" >> "$SYSTEMCTL_LOG"
case "$2" in
  show) printf 'LoadState=loaded\\nActiveState=active\\nSubState=running\\n'
        printf 'UnitFileState=enabled\\nMainPID=4321\\nNRestarts=2\\n' ;;
esac
"""


def test_service_install_now_status_uninstall(tmp_path: Path) -> None:
    cli = GoldenCli(tmp_path)
    (tmp_path / "desired.yaml").write_text("project: my-project\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    log = tmp_path / "systemctl.log"
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SYSTEMCTL_LOG": str(log),
    }
    cli.run("--state-dir", "state", "service", "install", "--now", env=env)
    (unit,) = (tmp_path / "config" / "systemd" / "user").glob("tpu-reconciler@desired-*.service")
    assert log.read_text().splitlines() == [
        "--user daemon-reload",
        f"--user enable --now {unit.name}",
    ]
    status = cli.run("--state-dir", "state", "service", "status", env=env).stdout
    assert "(current)" in status and "active (running), enabled, pid 4321, restarts 2" in status
    cli.run("--state-dir", "state", "service", "uninstall", env=env)
    assert not unit.exists()
    assert log.read_text().splitlines()[-2:] == [
        f"--user disable --now {unit.name}",
        "--user daemon-reload",
    ]
    gone = cli.run("--state-dir", "state", "service", "status", env=env, code=3)
    assert "not installed" in gone.stdout
    # Installed, but no systemd on this machine: nothing runs it, so not running (3).
    cli.run("--state-dir", "state", "service", "install", env=env)
    no_systemd = {**env, "PATH": str(tmp_path / "empty")}
    alone = cli.run("--state-dir", "state", "service", "status", env=no_systemd, code=3)
    assert "systemd: systemctl not found" in alone.stdout


def test_service_install_refuses_the_demo_s_exports(emulator: Emulator, tmp_path: Path) -> None:
    """The shell `demo --keep` leaves: the emulator's endpoints, the demo's gcloud config and
    token, its files (exactly the variables the demo exports). Refused in one line naming
    them, no unit written; --allow-emulator writes it anyway."""
    work = tmp_path / "tpu-reconciler-demo-abc123"
    work.mkdir()
    (work / "desired.yaml").write_text("project: my-project\n")
    env = {
        **emulator.gcloud_env(str(work / "gcloud"), str(work / "token"), "my-project"),
        "TPU_RECONCILER_FILE": str(work / "desired.yaml"),
        "TPU_RECONCILER_STATE_DIR": str(work / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PATH": "/usr/bin:/bin",
    }
    units = tmp_path / "config" / "systemd" / "user"
    done = subprocess.run(
        [*CLI, "service", "install"], env=clean_env(env), capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stdout == "", done
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: refusing to write the emulator or the demo into the unit")
    for name in ("CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", "CLOUDSDK_CONFIG", "TPU_RECONCILER_FILE",
                 "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "CLOUDSDK_CORE_ACCOUNT"):  # fmt: skip
        assert f"{name}=" in line, name
    assert f"={emulator.url} (a local endpoint: an emulator)" in line
    assert line.endswith("or pass --allow-emulator")
    assert not units.exists()
    allowed = subprocess.run(
        [*CLI, "service", "install", "--allow-emulator"],
        env=clean_env(env),
        capture_output=True,
        text=True,
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "note: the unit keeps emulator/demo settings (--allow-emulator)" in allowed.stdout
    (unit,) = units.glob("tpu-reconciler@desired-*.service")
    assert emulator.url in unit.read_text()


# --- confirm ------------------------------------------------------------------------------------


def test_confirm_without_an_id_asks_and_refuses_without_a_terminal(watched: GoldenCli) -> None:
    """Like ``release``: with no FINGERPRINT, a person at a terminal says yes to the deletes
    shown; without a terminal nobody can, so it refuses (exit 2) and writes nothing."""
    path = watched.cwd / "state" / "status.json"
    doc = json.loads(path.read_text())
    doc["plan"]["guard"] = {
        "limit": 2,
        "deletes": ["us-central2-b/a@1", "us-central2-b/b@2", "us-central2-b/c@3"],
        "slots": ["a", "b", "c"],
        "fingerprint": "0123456789abcdef",
        "command": "tpu-reconciler confirm 0123456789abcdef",
    }
    path.write_text(json.dumps(doc))
    confirmation = watched.cwd / "state" / "confirm.json"
    piped = watched.run("--state-dir", "state", "confirm", code=2)
    assert piped.stdout == ""
    assert "3 delete(s) wait for confirmation (us-central2-b/a@1, " in piped.stderr
    assert "stdin is not a terminal, so nobody can confirm" in piped.stderr
    assert "tpu-reconciler confirm 0123456789abcdef" in piped.stderr
    assert not confirmation.exists()

    no = Pty(watched.cwd, ["--state-dir", "state", "confirm"])
    no.answer(r"Delete 3 running TPU\(s\): us-central2-b/a@1, .*\? \[y/N\]", "n")
    assert no.finish() == 2 and not confirmation.exists()
    yes = Pty(watched.cwd, ["--state-dir", "state", "confirm"])
    yes.answer(r"\[y/N\]", "y")
    yes.expect("confirmed 3 delete")
    assert yes.finish() == 0 and confirmation.exists()


# --- completion -------------------------------------------------------------------------------


def _complete(script: Path, cwd: Path, *words: str) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        '_shtab_tpu_reconciler; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    bash = require_tool_path("bash")
    done = subprocess.run(
        [bash, "--norc", "-c", program], cwd=cwd, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def require_tool_path(name: str) -> str:
    path = shutil.which(name)
    assert path is not None, f"{name} is needed"
    return path


def test_completion_scripts_know_every_command(tmp_path: Path) -> None:
    cli = GoldenCli(tmp_path)
    commands = {word for path in command_paths(build_parser()) for word in path.split()}
    assert {"status", "events", "doctor", "init", "service", "completion", "tmux"} <= commands
    for shell in ("bash", "zsh"):
        text = cli.run("completion", shell).stdout
        missing = [c for c in commands if not re.search(rf"\b{re.escape(c)}\b", text)]
        assert not missing, f"{shell}: {missing}"
        (tmp_path / f"c.{shell}").write_text(text)
    zsh = shutil.which("zsh")
    if zsh:
        subprocess.run([zsh, "-n", str(tmp_path / "c.zsh")], check=True, timeout=30)

    script = tmp_path / "c.bash"
    (tmp_path / "mine.yaml").write_text("")
    assert _complete(script, tmp_path, "tpu-reconciler", "ser") == ["service"]
    assert _complete(script, tmp_path, "tpu-reconciler", "-f", "x", "service", "") == [
        "install",
        "uninstall",
        "status",
    ]
    assert _complete(script, tmp_path, "tpu-reconciler", "-f", "mi") == ["mine.yaml"]
    assert _complete(script, tmp_path, "tpu-reconciler", "init", "--mode", "o") == ["on-demand"]
    assert "--follow" in _complete(script, tmp_path, "tpu-reconciler", "events", "--")
    assert _complete(script, tmp_path, "tpu-reconciler", "completion", "") == ["bash", "zsh"]
