"""Copying text to the clipboard: OSC 52 through the terminal, then wl-copy / xclip.

OSC 52 works over SSH and through tmux (with ``set-clipboard on``) but a terminal may ignore
it silently, so a local clipboard tool also gets the text when one is installed: ``wl-copy``
under Wayland, ``xclip`` under X11. The text goes on the tool's stdin, never in its argv.

May: run wl-copy or xclip (argument lists, a short timeout). May not: print (the app writes
OSC 52 itself, through Textual's driver), import textual.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Final

_TIMEOUT: Final = 2.0


def local_tools(env: Mapping[str, str] | None = None) -> list[list[str]]:
    """The clipboard commands that may work here, best first."""
    env = os.environ if env is None else env
    tools: list[list[str]] = []
    if env.get("WAYLAND_DISPLAY") and shutil.which("wl-copy"):
        tools.append(["wl-copy"])
    if env.get("DISPLAY") and shutil.which("xclip"):
        tools.append(["xclip", "-selection", "clipboard"])
    return tools


def copy_local(text: str, env: Mapping[str, str] | None = None) -> str | None:
    """Give ``text`` to the first local clipboard tool that takes it; its name, or None."""
    for argv in local_tools(env):
        try:
            done = subprocess.run(
                argv,
                input=text.encode(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return argv[0]
    return None
