"""``scripts/test PATH`` is a focused run: the file's tests start in seconds (no mypy, no
lint-imports, no reinstall of an unchanged package); under ``CI=true`` everything runs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest

from tests.support.cli import ROOT

pytestmark = pytest.mark.integration

FILE = "tests/unit/test_durations.py"


def _script(*args: str, ci: bool) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHON"] = sys.executable
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env.get('PATH', '')}"
    if ci:
        env["CI"] = "true"
    started = time.monotonic()
    done = subprocess.run(
        [str(ROOT / "scripts" / "test"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return done, time.monotonic() - started


def _installed() -> bool:
    """Whether scripts/test already installed this checkout into this interpreter."""
    stamp = os.path.join(sys.prefix, ".tpu-reconciler-test-install")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    try:
        with open(stamp, encoding="utf-8") as f:
            return f.read().strip() == f"{ROOT} {digest}"
    except OSError:
        return False


def test_a_focused_run_skips_the_whole_tree_checks() -> None:
    if not _installed():
        _script(FILE, "-q", ci=False)  # once: the package installed for this interpreter
    focused, took = _script(FILE, "-q", ci=False)
    out = focused.stdout + focused.stderr
    assert focused.returncode == 0, out
    assert "scripts/test: a focused run" in out
    assert "Contracts:" not in out and "Success: no issues found" not in out  # no lint-imports
    assert " passed" in out  # ... and no mypy, but the tests ran
    assert took < 60, took


@pytest.mark.slow  # installs the package, type-checks and lints everything (~30 s)
def test_under_ci_nothing_is_skipped() -> None:
    whole, _ = _script(FILE, "-q", ci=True)
    out = whole.stdout + whole.stderr
    assert whole.returncode == 0, out
    assert "a focused run" not in out
    assert "Success: no issues found" in out and "Contracts:" in out
