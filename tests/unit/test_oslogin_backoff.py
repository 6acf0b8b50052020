"""The OS Login lookup's failure memory (``adapters.oslogin.UserResolver``): a failed lookup is
made once per backoff window — shared by concurrent callers, remembered in memory and in the
state dir beside the cache — and every caller gets its cause in one line naming
``settings.ssh_user``.

gcloud here is a small script on disk that counts its runs and fails as gcloud does (an
``ERROR:`` line, then the "report this issue" boilerplate), or prints a profile; the clock is
a number the test moves.
"""

from __future__ import annotations

import asyncio
import json
import stat
import time
from pathlib import Path

import pytest

from reconciler.adapters import oslogin
from reconciler.errors import SetupFailed

BOILERPLATE = (
    "If you would like to report this issue, please run the following command:\n"
    "  gcloud feedback\n"
    "\n"
    "To check gcloud for common problems, please run the following command:\n"
    "  gcloud info --run-diagnostics\n"
)
CAUSE = "ERROR: gcloud crashed (ConnectionError): NameResolutionError: oslogin.googleapis.com"


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def fake_gcloud(tmp_path: Path, *, fail: bool = True) -> tuple[Path, Path]:
    """A gcloud that appends a line to ``runs`` per run; returns (program, runs)."""
    runs = tmp_path / "runs"
    program = tmp_path / "gcloud"
    if fail:
        body = f"cat >&2 <<'END'\n{CAUSE}\n\n{BOILERPLATE}END\nexit 1\n"
    else:
        body = 'echo \'{"posixAccounts": [{"username": "alice_example_com"}]}\'\n'
    program.write_text(f"#!/bin/sh\necho run >> {runs}\n{body}")
    program.chmod(0o755)
    return program, runs


def count(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def resolver(tmp_path: Path, program: Path, clock: Clock) -> oslogin.UserResolver:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    return oslogin.UserResolver(state / "oslogin_user", gcloud=str(program), clock=clock)


def test_backoff_doubles_from_a_minute_to_a_quarter_hour() -> None:
    assert [oslogin.backoff(n) for n in (1, 2, 3, 4, 5, 6, 40)] == [
        60.0, 120.0, 240.0, 480.0, 900.0, 900.0, 900.0
    ]  # fmt: skip


async def test_forty_callers_at_once_share_one_failed_lookup(tmp_path: Path) -> None:
    program, runs = fake_gcloud(tmp_path)
    clock = Clock()
    reported: list[str] = []
    users = resolver(tmp_path, program, clock)
    users.report = lambda e: reported.append(e.message)

    outcomes = await asyncio.gather(*(users.resolve() for _ in range(40)), return_exceptions=True)

    assert count(runs) == 1 and users.lookups == 1
    assert all(isinstance(o, SetupFailed) for o in outcomes)
    messages = {str(o) for o in outcomes}
    assert len(messages) == 1, messages
    [message] = messages
    assert "NameResolutionError" in message  # the cause, not gcloud's boilerplate
    assert "gcloud feedback" not in message and "\n" not in message
    assert "settings.ssh_user" in message
    assert reported == [message]  # reported once, not once per caller
    assert all(isinstance(o, SetupFailed) and 59 <= o.delay <= 60 for o in outcomes)


async def test_one_lookup_per_backoff_window_then_longer_windows(tmp_path: Path) -> None:
    program, runs = fake_gcloud(tmp_path)
    clock = Clock()
    users = resolver(tmp_path, program, clock)
    for _ in range(5):
        with pytest.raises(SetupFailed):
            await users.resolve()
    assert count(runs) == 1

    clock.now += 59.0
    with pytest.raises(SetupFailed):
        await users.resolve()
    assert count(runs) == 1  # still inside the first minute

    clock.now += 2.0
    with pytest.raises(SetupFailed, match="next lookup after"):
        await users.resolve()
    assert count(runs) == 2  # the window ran out: one new lookup, and the next window is 2 min
    clock.now += 119.0
    with pytest.raises(SetupFailed):
        await users.resolve()
    assert count(runs) == 2
    clock.now += 2.0
    with pytest.raises(SetupFailed):
        await users.resolve()
    assert count(runs) == 3


async def test_the_failure_is_remembered_in_the_state_dir_for_other_processes(
    tmp_path: Path,
) -> None:
    program, runs = fake_gcloud(tmp_path)
    clock = Clock(time.time())  # the other process reads the real clock
    with pytest.raises(SetupFailed) as first:
        await resolver(tmp_path, program, clock).resolve()
    record = tmp_path / "state" / "oslogin_user.failed"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    doc = json.loads(record.read_text())
    assert "NameResolutionError" in doc["error"] and doc["failures"] == 1
    assert doc["at"].endswith("Z") and doc["retry_at_epoch"] == clock.now + 60.0

    # Another process (a CLI verb) fails at once with the same words and runs nothing.
    with pytest.raises(SetupFailed) as again:
        await oslogin.resolve_user(tmp_path / "state" / "oslogin_user", gcloud=str(program))
    assert count(runs) == 1
    assert str(again.value).split(" (")[0] == str(first.value).split(" (")[0]


async def test_a_success_forgets_the_failure_and_caches_the_user(tmp_path: Path) -> None:
    program, runs = fake_gcloud(tmp_path)
    clock = Clock()
    users = resolver(tmp_path, program, clock)
    with pytest.raises(SetupFailed):
        await users.resolve()
    program, runs = fake_gcloud(tmp_path, fail=False)
    with pytest.raises(SetupFailed):
        await users.resolve()  # fixed meanwhile, but the window has not run out
    assert await users.resolve(refresh=True) == "alice_example_com"  # refresh looks up anyway
    assert not (tmp_path / "state" / "oslogin_user.failed").exists()
    assert await users.resolve() == "alice_example_com"
    assert count(runs) == 2 and users.pending_failure() is None


async def test_a_record_from_the_future_does_not_block_lookups(tmp_path: Path) -> None:
    program, runs = fake_gcloud(tmp_path, fail=False)
    clock = Clock()
    state = tmp_path / "state"
    state.mkdir()
    failure = oslogin.LookupFailure("x", clock.now + 3600, 1, clock.now + 3660)
    oslogin.write_failure(oslogin.failure_path(state / "oslogin_user"), failure)
    assert await resolver(tmp_path, program, clock).resolve() == "alice_example_com"
    assert count(runs) == 1


def test_an_unreadable_record_is_no_failure(tmp_path: Path) -> None:
    path = tmp_path / "oslogin_user.failed"
    path.write_text("{not json")
    assert oslogin.read_failure(path) is None
    assert oslogin.read_failure(tmp_path / "absent") is None
