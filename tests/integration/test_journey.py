"""A new user's first hour, as a test: the README's demo, then ``demo --keep`` and every
read-only verb with the environment it prints, inside a network namespace that has only
loopback (``unshare -n``, then ``ip link set lo up``), so anything that would reach a real
Google endpoint fails there instead of passing quietly on a machine with a network.

The scenario runs in a child process in that namespace (this module run as a script) and
writes what each command did to a JSON file; the test then asserts on all of it at once, so one
failure report lists every case that broke:

- the demo passes, and ``demo --keep`` reaches its export list;
- every verb (``status``, ``status --json``, ``plan``, ``events``, ``history``, ``recommend``,
  ``doctor``, ``info``, ``logs``, ``ssh --print``, ``validate``) answers within 5 s, with no
  ``Traceback``, and exits with the code named for it below (``reconciler.exitcodes``); the
  verbs that take a slot run on three: the held slot (ACTIVE, on an emulated node), a slot
  that does not exist, and the race's cancelled candidate (no node). None of the demo's slots
  has a workload, so both existing ones are slots without a workload;
- ``validate`` of a hand-written file with a first day's mistakes (a size that does not exist,
  a misspelled zone, a slot bigger than its quota) names each at its line with a did-you-mean
  or the numbers, and Google's own name ``v5e-8`` is accepted with a note of the name sent;
- ``service install`` in that shell refuses to bake the emulator and the demo's files into a
  unit (naming them, writing nothing), and ``tui`` without a terminal refuses at once;
- ``history`` shows the demo's preemption (the demo's controller records history);
- the event log shows the restored file valid again after the invalid save;
- ``info`` shows no time ahead of the wall clock (the emulator's clock runs 20x fast);
- no Python process (ours or gcloud's) asked for a non-loopback address: a ``sitecustomize``
  audit hook logs every ``socket.connect`` / ``getaddrinfo`` whose target is not loopback;
- Ctrl-C stops ``demo --keep`` and removes its temporary directory.

Needs ``unshare`` and ``ip`` (and gcloud, which the verbs call): locally a missing one skips,
under ``CI=true`` it fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest

from reconciler import exitcodes
from reconciler.surfaces.demo import HELD, LOSER
from tests.support.cli import CLI_ARGV, ROOT, clean_env
from tests.support.tools import in_ci, require_tool

pytestmark = pytest.mark.integration

#: Every verb answers within this many seconds (a person is waiting at the prompt).
BUDGET: Final = 5.0
#: The cases of a verb that takes a slot.
SLOTS: Final = {"held": HELD, "missing": "spot-v4-8-usc2b-2", "unqueued": LOSER}

#: verb -> (argv after the verb, with {slot} for the slot; expected exit code, by name, per
#: case: "-" for a verb that takes no slot).
VERBS: Final[dict[str, tuple[tuple[str, ...], dict[str, str]]]] = {
    "status": ((), {"-": "EX_OK"}),
    "status --json": (("--json",), {"-": "EX_OK"}),
    "plan": ((), {"-": "EX_OK"}),
    "events": ((), {"-": "EX_OK"}),
    "history": ((), {"-": "EX_OK"}),
    "history --json": (("--json",), {"-": "EX_OK"}),
    "history --zone": (("--zone", "us-west4-a"), {"-": "EX_OK"}),
    "recommend": (("v6e-8",), {"-": "EX_OK"}),
    "doctor": ((), {"-": "EX_OK"}),
    "validate": ((), {"-": "EX_OK"}),
    "info": (
        ("{slot}",),
        {"held": "EX_OK", "missing": "EX_REFUSED", "unqueued": "EX_OK"},
    ),
    "logs": (
        # no workload anywhere: refused before any network step
        ("{slot}",),
        {"held": "EX_REFUSED", "missing": "EX_REFUSED", "unqueued": "EX_REFUSED"},
    ),
    "ssh --print": (
        # the command is printed for the emulated node (with a note that no machine answers)
        ("--print", "{slot}"),
        {"held": "EX_OK", "missing": "EX_REFUSED", "unqueued": "EX_REFUSED"},
    ),
    # Mistakes a first day makes in the demo's shell: a service installed with the demo's
    # exports (refused, naming them), the TUI from a pipe (refused at once).
    "service install": (("install",), {"-": "EX_REFUSED"}),
    "tui": ((), {"-": "EX_USAGE"}),
}

#: A hand-written file with a first day's mistakes, and what ``validate`` says of each.
MISTAKES: Final = textwrap.dedent(
    """\
    project: my-project
    quotas:
      - {family: v5e, mode: spot, zone: us-west4-a, chips: 16}
    slots:
      - {name: a, zone: us-west4-a, accelerator: v6e-7, mode: spot, want: held}
      - {name: b, zone: us-wset4-a, accelerator: v5litepod-8, mode: spot, want: held}
      - {name: c, zone: us-west4-a, accelerator: v5litepod-16, slices: 2, mode: spot, want: held}
    """
)
MISTAKES_SAID: Final = (
    "mistakes.yaml:5:46: accelerator 'v6e-7' does not exist",
    "(did you mean 'v6e-8'?)",
    "mistakes.yaml:6:21: zone 'us-wset4-a' is not a known zone (did you mean 'us-west4-a'?)",
    "mistakes.yaml:7:46: slot 'c' can never fit: a 2-slice v5litepod-16 is 32 chips",
)
#: Google's own name for a v5e size: accepted, with the name sent.
ALIAS: Final = (
    "project: my-project\nslots:\n  - {name: a, zone: us-west4-a, accelerator: v5e-8, want: held}\n"
)
ALIAS_SAID: Final = "note: v5e-8 is v5litepod-8"

#: A sitecustomize for every Python process of the scenario: log each non-loopback target.
AUDIT: Final = textwrap.dedent(
    """
    import os, sys

    def _journey_audit():
        import ipaddress, json
        path = os.environ.get("JOURNEY_AUDIT_LOG")
        if not path:
            return

        def local(host):
            if host in (None, "", b"", "localhost"):
                return True
            try:
                return ipaddress.ip_address(host).is_loopback
            except ValueError:
                return False

        def hook(event, args):
            try:
                if event == "socket.connect":
                    address = args[1]
                    if not isinstance(address, tuple) or local(address[0]):
                        return
                    target = address[0]
                elif event == "socket.getaddrinfo":
                    if local(args[0]):
                        return
                    target = args[0]
                else:
                    return
                line = json.dumps({"event": event, "target": str(target), "argv": sys.argv[:6]})
                with open(path, "a", encoding="utf-8") as log:
                    log.write(line + "\\n")
            except Exception:
                pass

        sys.addaudithook(hook)

    _journey_audit()
    """
)


def _netns_argv() -> list[str]:
    """The prefix that runs a command in a new network namespace with loopback up."""
    unshare, ip = require_tool("unshare"), require_tool("ip")
    new_ns = [unshare, "-n"] if os.geteuid() == 0 else [unshare, "-r", "-n"]
    argv = [*new_ns, "sh", "-c", f'{ip} link set lo up && exec "$0" "$@"']
    probe = subprocess.run([*argv, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        message = f"cannot make a network namespace: {probe.stderr.strip()}"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)
    return argv


def test_a_new_users_first_hour_in_a_namespace_with_only_loopback(tmp_path: Path) -> None:
    require_tool("gcloud")
    argv = _netns_argv()
    out = tmp_path / "journey.json"
    env = clean_env({"JOURNEY_WORK": str(tmp_path)})
    env = {k: v for k, v in env.items() if not k.startswith("CLOUDSDK_")}
    inner = subprocess.run(
        [*argv, sys.executable, "-m", "tests.integration.test_journey", str(out)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert inner.returncode == 0 and out.exists(), inner.stdout + inner.stderr
    report = json.loads(out.read_text())
    problems: list[str] = []

    demo = report["demo"]
    if demo["rc"] != exitcodes.EX_OK or "Traceback" in demo["output"]:
        problems.append(f"demo: exit {demo['rc']}\n{demo['output']}")
    for step in ("✓ preemption recovered", "✓ file restored"):
        if step not in demo["output"]:
            problems.append(f"demo: no {step!r} step\n{demo['output']}")
    if not report["keep"]["exports"]:
        problems.append(f"demo --keep printed no environment:\n{report['keep']['output']}")

    named = {v: k for k, v in vars(exitcodes).items() if k.startswith("EX_")}
    for run in report["runs"]:
        label = f"{run['verb']} [{run['case']}]"
        shown = f"$ {' '.join(run['argv'])}\n{run['stdout']}{run['stderr']}".rstrip()
        if "Traceback" in run["stdout"] + run["stderr"]:
            problems.append(f"{label}: a traceback\n{shown}")
        if run["elapsed"] > BUDGET:
            problems.append(f"{label}: took {run['elapsed']:.1f}s (budget {BUDGET:g}s)\n{shown}")
        expected = getattr(exitcodes, run["expected"])
        if run["rc"] not in named:
            problems.append(f"{label}: exit {run['rc']}, not a named code\n{shown}")
        elif run["rc"] != expected:
            got = named[run["rc"]]
            problems.append(f"{label}: exit {got}, expected {run['expected']}\n{shown}")

    stamp = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z"
    for run in report["runs"]:  # the emulator's fast clock must not leak into the times shown
        if run["verb"] == "info":
            for m in re.finditer(rf"(?:created|since) {stamp}", run["stdout"]):
                moment = datetime.fromisoformat(m[1]).replace(tzinfo=UTC).timestamp()
                if moment > run["ended_at"]:
                    problems.append(f"info [{run['case']}] shows a time ahead: {m[0]}")

    history = _run(report, "history --json")
    places = json.loads(history["stdout"] or "{}").get("places", []) if history else []
    preempted = [p for p in places if p["zone"] == "us-central2-b" and p["preemptions"] >= 1]
    if not preempted:
        problems.append(f"history shows no preemption in us-central2-b: {places}")
    text = _run(report, "history")
    if text and "us-central2-b" not in text["stdout"]:
        problems.append(f"history's table has no us-central2-b row:\n{text['stdout']}")

    nowhere = _run(report, "history --zone")
    if nowhere and "No capacity history matches zone=us-west4-a" not in nowhere["stdout"]:
        problems.append(f"history --zone with nothing there:\n{nowhere['stdout']}")

    service = _run(report, "service install")
    if service and "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU=" not in service["stderr"]:
        problems.append(f"service install did not name the emulator:\n{service['stderr']}")
    if report.get("units"):
        problems.append(f"service install wrote a unit from the demo's shell: {report['units']}")
    tui = _run(report, "tui")
    if tui and "tui needs a terminal" not in tui["stderr"]:
        problems.append(f"tui without a terminal:\n{tui['stdout']}{tui['stderr']}")

    wrong = report["mistakes"]
    if wrong["rc"] != exitcodes.EX_REFUSED or "Traceback" in wrong["output"]:
        problems.append(f"validate of the mistakes: exit {wrong['rc']}\n{wrong['output']}")
    for said in MISTAKES_SAID:
        if said not in wrong["output"]:
            problems.append(f"validate did not say {said!r}:\n{wrong['output']}")
    alias = report["alias"]
    if alias["rc"] != exitcodes.EX_OK or ALIAS_SAID not in alias["output"]:
        problems.append(f"validate of v5e-8: exit {alias['rc']}\n{alias['output']}")

    kinds = [e["kind"] for e in report["events"] if e["kind"].startswith("desired.")]
    if "desired.invalid" not in kinds or kinds[-1] != "desired.valid":
        problems.append(f"the event log does not end valid after the restore: {kinds}")

    for hit in report["audit"]:
        problems.append(f"a non-loopback address was asked for: {hit}")

    keep = report["keep"]
    if keep["rc"] != exitcodes.EX_OK or "Traceback" in keep["output"]:
        problems.append(f"demo --keep after Ctrl-C: exit {keep['rc']}\n{keep['output'][-2000:]}")
    if keep["work_left"]:
        problems.append(f"Ctrl-C left {keep['work']} behind")

    assert not problems, f"{len(problems)} problem(s):\n\n" + "\n\n".join(problems)


def _run(report: dict[str, Any], verb: str) -> dict[str, Any] | None:
    return next((r for r in report["runs"] if r["verb"] == verb), None)


# --- the scenario, run inside the namespace ----------------------------------------------------


def _scenario(out: Path) -> None:
    work = Path(os.environ["JOURNEY_WORK"])
    audit_dir = work / "audit"
    audit_dir.mkdir()
    (audit_dir / "sitecustomize.py").write_text(AUDIT, encoding="utf-8")
    audit_log = work / "audit.jsonl"
    base = clean_env()
    base["PYTHONPATH"] = os.pathsep.join((str(audit_dir), base["PYTHONPATH"]))
    base["JOURNEY_AUDIT_LOG"] = str(audit_log)
    base["TMPDIR"] = str(work / "tmp")  # the demos' directories: a leak stays in here
    base["XDG_CONFIG_HOME"] = str(work / "config")  # where `service install` would write
    (work / "tmp").mkdir()
    report: dict[str, Any] = {"runs": []}

    started = time.monotonic()
    demo = subprocess.run(
        [*CLI_ARGV, "demo"], env=base, capture_output=True, text=True, timeout=180, check=False
    )
    report["demo"] = {
        "rc": demo.returncode,
        "output": demo.stdout + demo.stderr,
        "elapsed": time.monotonic() - started,
    }

    for name, text in (("mistakes", MISTAKES), ("alias", ALIAS)):
        path = work / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        done = subprocess.run(
            [*CLI_ARGV, "-f", str(path), "validate"], env=base, capture_output=True, text=True,
            timeout=60, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        report[name] = {"rc": done.returncode, "output": done.stdout + done.stderr}

    keep = subprocess.Popen(
        [*CLI_ARGV, "demo", "--keep"], env=base, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    exports: dict[str, str] = {}
    lines: list[str] = []
    try:
        assert keep.stdout is not None
        for line in keep.stdout:
            lines.append(line)
            if m := re.match(r"\s+export (\w+)=(.*)$", line):
                exports[m[1]] = m[2]
            if "tpu-reconciler status" in line:
                break
        shell = {**base, **exports}
        if exports:
            _wait_for_history(shell)
            for verb, (args, cases) in VERBS.items():
                for case, expected in cases.items():
                    filled = [a.replace("{slot}", SLOTS.get(case, "")) for a in args]
                    report["runs"].append(_verb(shell, verb, case, expected, filled))
            report["events"] = _events(shell)
    finally:
        os.killpg(keep.pid, signal.SIGINT)
        rest, _ = keep.communicate(timeout=60)
    work_dir = Path(exports.get("TPU_RECONCILER_STATE_DIR", "/nonexistent/state")).parent
    report["keep"] = {
        "rc": keep.returncode,
        "output": "".join(lines) + rest,
        "exports": exports,
        "work": str(work_dir),
        "work_left": work_dir.exists(),
    }
    report.setdefault("events", [])
    report["units"] = [str(p) for p in (work / "config").rglob("*.service")]
    text = audit_log.read_text(encoding="utf-8") if audit_log.exists() else ""
    report["audit"] = [json.loads(line) for line in text.splitlines() if line.strip()]
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")


def _verb(env: dict[str, str], verb: str, case: str, expected: str, args: list[str]) -> Any:
    argv = [*CLI_ARGV, verb.split()[0], *args]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            check=False,
        )  # fmt: skip
        rc, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = -9, _text(e.stdout), _text(e.stderr) + "(killed after 60 s)"
    return {
        "verb": verb, "case": case, "expected": expected,
        "argv": ["tpu-reconciler", *argv[len(CLI_ARGV):]], "rc": rc,
        "elapsed": time.monotonic() - started, "stdout": stdout, "stderr": stderr,
        "ended_at": time.time(),
    }  # fmt: skip


def _text(output: bytes | str | None) -> str:
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else output or ""


def _wait_for_history(env: dict[str, str], timeout: float = 15.0) -> None:
    """The recorder writes in batches about a second apart: wait for the preemption's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(
            [*CLI_ARGV, "history", "--json", "--zone", "us-central2-b"],
            env=env, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        try:
            places = json.loads(done.stdout)["places"]
        except (ValueError, KeyError):
            places = []
        if any(p["preemptions"] >= 1 for p in places):
            return
        time.sleep(0.5)


def _events(env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*CLI_ARGV, "events", "--json"], env=env, capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip
    events: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


if __name__ == "__main__":
    _scenario(Path(sys.argv[1]))
