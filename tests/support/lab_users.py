"""Real Unix users for the lab tests: a group, users made with ``useradd`` (removed after), and an
interpreter they may run with this checkout's code.

The test's own interpreter lives in root's home, which other users cannot enter. ``user_python``
makes a virtual environment of the system's ``/usr/bin/python3`` (same minor version) in a
world-readable directory and copies into it this package and the files of every distribution it
needs at run time, as this interpreter has them (``importlib.metadata``): ~1.5 s, against
30-60 s for a ``pip install`` (``test_shared_lab.py`` still installs it that way, as users do).

``Lab.run(user, ...)`` runs the CLI as ``user`` (``setpriv``, a clean environment: their own
home, none of root's settings); ``Lab.sh(user, ...)`` any other command, the way a member would
try it by hand (``ln``, ``mv``, ``chmod``, a shell redirection).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.tools import in_ci, require_root, require_tool

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"


def require_system_python() -> str:
    """``/usr/bin/python3`` must be a Python 3.11+ with ``venv``; returns its version."""
    probe = [SYSTEM_PYTHON, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=False)
        version, said = done.stdout.strip(), done.stdout + done.stderr
    except OSError as e:
        version, said = "", e.strerror or str(e)
    if not version or tuple(map(int, version.split("."))) < (3, 11):
        message = f"{SYSTEM_PYTHON} is not a Python 3.11+ with venv: {said.strip()}"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)
    return version


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _runtime_distributions() -> list[metadata.Distribution]:
    """Every distribution ``tpu-reconciler`` needs at run time (its extras left out)."""
    seen: set[str] = set()
    found = []
    todo = ["tpu-reconciler"]
    while todo:
        name = todo.pop()
        if _norm(name) in seen:
            continue
        seen.add(_norm(name))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(dist)
        for requirement in dist.requires or []:
            wanted, _, marker = requirement.partition(";")
            if "extra ==" in marker and not (_norm(name) == "google-auth" and "requests" in marker):
                continue
            match = re.match(r"[A-Za-z0-9_.-]+", wanted.strip())
            if match:
                todo.append(match.group(0))
    return found


def _place(source: Path, target: Path) -> None:
    """``source`` at ``target``: a hard link when both are on one filesystem and everyone may
    read it (instant, and the compiled ``.pyc`` beside stays valid), else a copy keeping the
    mtime, made readable."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.stat().st_mode & 0o004:
        try:
            os.link(source, target)
            return
        except OSError:
            pass
    shutil.copy2(source, target)
    target.chmod(target.stat().st_mode | 0o444)


def user_python(base: Path, code: Path = ROOT) -> Path:
    """A virtual environment in ``base`` (world-readable) that any user may run, with this
    checkout's ``reconciler`` (or ``code``'s) and its run-time dependencies; returns its
    interpreter."""
    venv = base / "venv"
    subprocess.run(
        [SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    site = next((venv / "lib").glob("python3*/site-packages"))
    for dist in _runtime_distributions():
        if _norm(dist.metadata["Name"]) == "tpu-reconciler":
            continue
        for file in dist.files or ():
            source = Path(str(dist.locate_file(file)))
            if ".." not in file.parts and source.is_file():
                _place(source, site / file)
    shutil.copytree(code / "reconciler", site / "reconciler")  # copy2: .pyc beside stay valid
    # compiled here (what is not already): the users cannot write __pycache__, and would
    # compile every module on every run
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "compileall", "-q", str(site / "reconciler")], check=True, timeout=300
    )
    for path in (base, *base.rglob("*")):
        if path.is_dir() and not path.is_symlink():  # never chmod through a link (to /usr)
            path.chmod(0o755)
    return python


@contextmanager
def unix_users(group: str, names: Sequence[str], home: Path) -> Iterator[None]:
    """``group`` and ``names`` (all in it), each with a 0700 home under ``home``; removed
    afterwards."""
    require_root("creating Unix users")
    for tool in ("useradd", "userdel", "groupadd", "groupdel", "setpriv"):
        require_tool(tool)
    made: list[str] = []
    try:
        subprocess.run(["groupadd", group], check=True, capture_output=True, timeout=60)
        for user in names:
            subprocess.run(
                ["useradd", "-M", "-N", "-g", group, "-d", str(home / user), user],
                check=True,
                capture_output=True,
                timeout=60,
            )
            made.append(user)
            (home / user).mkdir(mode=0o700)
            shutil.chown(home / user, user, group)
        yield
    finally:
        for user in made:
            subprocess.run(["userdel", user], capture_output=True, timeout=60, check=False)
        subprocess.run(["groupdel", group], capture_output=True, timeout=60, check=False)


@dataclass(frozen=True)
class Users:
    """A group and its users, made once per module (``lab_users``)."""

    group: str
    names: tuple[str, ...]
    home: Path  # world-traversable; one home per user below it
    python: Path


@dataclass
class Lab:
    """One lab: its users, a directory of its own, the desired file and state directory."""

    users: Users
    base: Path  # this lab's directory (the controller's user's, the group's)
    env: Mapping[str, str] = field(default_factory=dict)  # added to every command's

    @property
    def desired(self) -> Path:
        return self.base / "desired.yaml"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def members(self) -> Path:
        return self.base / "desired.d"

    def environment(self, user: str) -> list[str]:
        home = self.users.home / user
        env = {
            "PATH": f"{self.users.python.parent}:/usr/bin:/bin",
            "HOME": str(home),
            "XDG_CONFIG_HOME": f"{home}/.config",
            "LANG": "C.UTF-8",
            **self.env,
        }
        return [f"{k}={v}" for k, v in env.items()]

    def command(self, user: str, *argv: str) -> list[str]:
        """``argv`` as ``user`` (``setpriv`` execs it: a signal reaches the command itself)."""
        who = ["--reuid", user, "--regid", self.users.group, "--init-groups"]
        return ["setpriv", *who, "--", "/usr/bin/env", "-i", *self.environment(user), *argv]

    def run(self, user: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``tpu-reconciler -f desired --state-dir state ARGS`` as ``user``."""
        argv = [str(self.users.python), "-m", "reconciler", "-f", str(self.desired)]
        return self.sh(user, *argv, "--state-dir", str(self.state), *args, timeout=timeout)

    def sh(
        self, user: str, *argv: str, input: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` as ``user``, in their home."""
        return subprocess.run(
            self.command(user, *argv),
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            check=False,
            cwd=self.users.home / user,
        )

    def write_as(self, user: str, path: Path, text: str, *, umask: str = "022") -> None:
        """``text`` into ``path`` as ``user`` saves it: a new file renamed into place."""
        script = f'umask {umask} && cat > "$1.new" && mv -f "$1.new" "$1"'
        done = self.sh(user, "/bin/sh", "-c", script, "sh", str(path), input=text)
        assert done.returncode == 0, done.stderr


def installed_python(base: Path) -> Path:
    """A virtual environment of the system's interpreter with this package ``pip install``ed
    into it, as a user installs it (30-60 s)."""
    venv = base / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-input", str(ROOT)],
        check=True,
        timeout=900,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    for path in (base, *base.rglob("*")):
        if path.is_dir() and not path.is_symlink():  # never chmod through a link (to /usr)
            path.chmod(0o755)
    return python


@contextmanager
def lab_users(
    names: Sequence[str], *, build: Callable[[Path], Path] = user_python
) -> Iterator[Users]:
    """A group and ``names`` (the first: the controller's user), with an interpreter they may
    run (``build``: ``user_python``, or ``installed_python``, which a system Python of another
    minor version than this one needs)."""
    require_root("creating Unix users")
    version = require_system_python()
    if version != f"{sys.version_info.major}.{sys.version_info.minor}":
        build = installed_python  # the copied compiled packages are this interpreter's
    base = Path(tempfile.mkdtemp(prefix="tr-lab-users-"))
    try:
        base.chmod(0o755)
        tag = os.urandom(3).hex()
        group = f"trl{tag}"
        users = tuple(f"{name[:3]}{tag}" for name in names)
        home = base / "home"
        home.mkdir(mode=0o755)
        python = build(base / "python")
        with unix_users(group, users, home):
            yield Users(group, users, home, python)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def new_lab(users: Users, desired: str) -> Lab:
    """A fresh lab directory of the controller's user (``users.names[0]``), the group's,
    holding ``desired`` as the shared desired file."""
    base = Path(tempfile.mkdtemp(prefix="tr-lab-", dir=users.home.parent))
    owner = users.names[0]
    base.chmod(0o2755)
    shutil.chown(base, owner, users.group)
    lab = Lab(users, base)
    lab.desired.write_text(desired)
    shutil.chown(lab.desired, owner, users.group)
    return lab
