"""Emulator and demo settings in the environment ``service install`` would bake into a unit.

``tpu-reconciler demo --keep`` prints exports that point gcloud and the controller at the
built-in emulator: every ``CLOUDSDK_API_ENDPOINT_OVERRIDES_*`` at a loopback URL, a throw-away
``CLOUDSDK_CONFIG`` and token file, an ``@example.com`` account, and ``TPU_RECONCILER_FILE`` /
``TPU_RECONCILER_STATE_DIR`` in the demo's temporary directory (``DEMO_DIR_PREFIX``), all gone
when the demo stops. A unit installed from that shell would run a controller against nothing
real, for days, without a word. ``emulator_settings`` finds each of them (and the desired file
or state directory chosen through them), so ``install`` can refuse unless asked.

Pure: reads the mapping and paths it is given, never the disk. May: compute. May not: print.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import PurePath
from typing import Final
from urllib.parse import urlsplit

#: The prefix of the demo's temporary directory (``surfaces/demo.py`` makes it).
DEMO_DIR_PREFIX: Final = "tpu-reconciler-demo-"
ENDPOINT_PREFIX: Final = "CLOUDSDK_API_ENDPOINT_OVERRIDES_"
#: Paths the demo exports; each is the demo's when it lies in its temporary directory.
DEMO_PATHS: Final = (
    "CLOUDSDK_CONFIG",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    "TPU_RECONCILER_FILE",
    "TPU_RECONCILER_STATE_DIR",
)


def _loopback(url: str) -> bool:
    host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _demo_path(path: str | PurePath | None) -> bool:
    return path is not None and any(
        part.startswith(DEMO_DIR_PREFIX) for part in PurePath(path).parts
    )


def emulator_settings(
    env: Mapping[str, str], *, desired_file: PurePath, state_dir: PurePath
) -> list[str]:
    """Each emulator or demo setting found, as ``NAME=value (why)``; empty when none."""
    found = [
        f"{name}={value} (a local endpoint: an emulator)"
        for name, value in sorted(env.items())
        if name.startswith(ENDPOINT_PREFIX) and value and _loopback(value)
    ]
    found += [
        f"{name}={env[name]} (the demo's, deleted when it stops)"
        for name in DEMO_PATHS
        if _demo_path(env.get(name))
    ]
    account = env.get("CLOUDSDK_CORE_ACCOUNT", "")
    if account.endswith("@example.com"):
        found.append(f"CLOUDSDK_CORE_ACCOUNT={account} (a documentation address: not real)")
    for what, path in (("-f", desired_file), ("--state-dir", state_dir)):
        if _demo_path(path) and not any(str(path) in f for f in found):
            found.append(f"{what} {path} (the demo's, deleted when it stops)")
    return found
