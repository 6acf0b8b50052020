"""The one way tests wait for something: poll a check until it holds or time runs out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def wait_until(what: str, check: Callable[[], bool], timeout: float, step: float = 0.02) -> None:
    """Block until ``check()`` holds; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting until {what}")
        time.sleep(step)


async def eventually(check: Callable[[], bool], timeout: float = 5.0, step: float = 0.02) -> bool:
    """Await until ``check()`` holds: True, or False once ``timeout`` s passed without it."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True
