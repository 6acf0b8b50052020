"""The one way tests run the real CLI: ``python -m reconciler`` in a subprocess.

``CLI_ARGV`` is the command (for ``Popen`` / ``asyncio.create_subprocess_exec`` callers),
``run_cli`` runs it once and returns the finished process, ``Cli`` is a runner bound to one
environment, directory and leading arguments (``-f FILE``, ``--state-dir DIR``).
``clean_env`` is the usual environment: this process's, without ``TPU_RECONCILER_*`` settings
that would leak into the command (nor ``COLUMNS``/``LINES``), with this checkout on
``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
CLI_ARGV: Final = (sys.executable, "-m", "reconciler")

_Stdin = int | IO[Any] | None


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without ``TPU_RECONCILER_*``, ``PYTHONPATH`` this checkout, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_RECONCILER_")}
    # the command measures its own terminal: a size inherited from the test runner (pytest-xdist
    # workers and some CI shells export COLUMNS) would override the pty's
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    stdin: _Stdin = subprocess.DEVNULL,
    input: str | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """``python -m reconciler ARGS`` to completion, output captured as text.

    ``env`` None inherits this process's environment unchanged; ``input`` (text for stdin)
    needs ``stdin=None``, as with ``subprocess.run``.
    """
    return subprocess.run(
        [*CLI_ARGV, *args],
        env=None if env is None else dict(env),
        cwd=cwd,
        stdin=stdin,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Cli:
    """``run_cli`` with a fixed environment, working directory and leading arguments."""

    def __init__(
        self,
        *leading: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.leading = tuple(leading)
        self.env = None if env is None else dict(env)
        self.cwd = cwd
        self.timeout = timeout

    def argv(self, *args: str) -> list[str]:
        return [*CLI_ARGV, *self.leading, *args]

    def __call__(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: _Stdin = subprocess.DEVNULL,
        input: str | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run with ``env`` laid over the runner's environment."""
        merged = self.env if env is None else {**(self.env or os.environ), **env}
        return run_cli(
            *self.leading,
            *args,
            env=merged,
            cwd=self.cwd,
            stdin=stdin,
            input=input,
            timeout=self.timeout if timeout is None else timeout,
        )
