"""Chip telemetry over the workload runner's pooled SSH connections.

On a worker's pooled connection (``adapters/workload_pool._Pooled``) one more channel is kept
open: the chip probe (``adapters/telemetry_probe.py``, its text sent as ``python -c``; the
python of the private venv ``setup.telemetry`` installs at ``~/.tpu-reconciler/telemetry``,
else the worker's ``python3``). Each request is one line and one JSON answer on it, so a probe
pass asks the wrapper and the chip probe at once over the same connection and waits for the
slower of two answers, not for a new channel. An answer not back in time is read and dropped
before the next request (a late answer is never taken for the next one's), so a probe slow to
start on a busy worker is kept, not restarted each pass; any other failure closes the channel
and the next request opens it again.

``read`` gives a worker's ``WorkerTelemetry`` (figures the service did not give are unknown),
``stop_holders`` ends the processes holding the chips (SIGTERM, grace, SIGKILL, done by the
probe on the worker), ``parse`` reads an answer. ``DEVICES`` are the device files whose
holders are the chips' users; ``TPU_RECONCILER_TPU_DEVICES`` (colon-separated globs, in the
controller's environment) replaces them, for tests and unusual images.

May: open channels on pooled connections. May not: open connections, decide anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import json
import os
import shlex
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import asyncssh

from reconciler.adapters.ssh import Worker
from reconciler.adapters.workload_pool import WorkerPool, _Pooled
from reconciler.adapters.workload_wire import parse_probe
from reconciler.core.telemetry import holders_text, strays
from reconciler.errors import WorkloadError
from reconciler.model.observed import Node
from reconciler.model.telemetry import ChipReading, TpuHolder, WorkerTelemetry
from reconciler.model.workload import WorkerProbe

DEVICES: Final = ("/dev/accel[0-9]*", "/dev/vfio/[0-9]*")
_CHANNEL: Final = "telemetry"
_PROBE: Final = "telemetry_probe.py"
_SETUP: Final = "telemetry_setup.sh"
#: Longest a pass waits for one worker's chip figures (they are then unknown).
CHIPS_TIMEOUT: Final = 3.0


def _probe_text() -> str:
    return importlib.resources.files("reconciler.adapters").joinpath(_PROBE).read_text()


def setup_script() -> Path:
    """The bootstrap script that installs the probe's client (``setup.telemetry``)."""
    return Path(str(importlib.resources.files("reconciler.adapters").joinpath(_SETUP)))


def devices() -> tuple[str, ...]:
    text = os.environ.get("TPU_RECONCILER_TPU_DEVICES")
    return tuple(p for p in text.split(":") if p) if text else DEVICES


def command(base: str, wrapper: str, patterns: tuple[str, ...]) -> str:
    """The probe's command line: the venv's python if installed, else ``python3``."""
    venv = shlex.quote(f"{base}/telemetry/bin/python")
    args = " ".join(shlex.quote(a) for a in ("serve", base, "--wrapper", wrapper, *patterns))
    return f'p={venv}; [ -x "$p" ] || p=python3; exec "$p" -c {shlex.quote(_probe_text())} {args}'


@dataclass(slots=True)
class _Channel:
    process: asyncssh.SSHClientProcess[bytes] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    owed: int = 0  # answers still to come for requests that timed out (read and dropped first)
    ready: bool = False  # it has answered: the workload's probe may go through it


def _line(answer: bytes) -> bytes:
    if not answer.endswith(b"\n"):
        raise EOFError("the chip probe's channel closed")
    return answer


def _channel(pooled: _Pooled) -> _Channel:
    channel = pooled.channels.get(_CHANNEL)
    if channel is None:
        channel = pooled.channels[_CHANNEL] = _Channel()
    assert isinstance(channel, _Channel)
    return channel


async def _ask_line(pooled: _Pooled, request: str, timeout: float | None) -> bytes:
    channel = _channel(pooled)
    async with channel.lock:
        if channel.process is None:
            channel.process = await pooled.conn.create_process(
                command(pooled.base, pooled.wrapper, devices()),
                encoding=None,
                stderr=asyncssh.DEVNULL,
            )
        process = channel.process
        try:
            async with asyncio.timeout(timeout):
                while channel.owed:  # a late answer is never read as this one's
                    _line(await process.stdout.readline())
                    channel.owed -= 1
                process.stdin.write(request.encode() + b"\n")
                channel.owed += 1
                answer = _line(await process.stdout.readline())
                channel.owed -= 1
        except TimeoutError:  # slow (a probe starting on a busy worker): keep the channel
            raise
        except BaseException:
            with contextlib.suppress(Exception):
                process.close()
            channel.process, channel.owed, channel.ready = None, 0, False
            raise
    channel.ready = True
    return answer


async def _ask(pooled: _Pooled, request: str, timeout: float | None) -> dict[str, Any]:
    answer = await _ask_line(pooled, request, timeout)
    try:
        value = json.loads(answer)
    except ValueError:
        raise WorkloadError(f"unreadable chip probe answer {answer[:200]!r}") from None
    if not isinstance(value, dict):
        raise WorkloadError(f"unreadable chip probe answer {answer[:200]!r}")
    if "error" in value:
        raise WorkloadError(f"the chip probe refused: {value['error']}")
    return value


async def read(pooled: _Pooled, timeout: float | None = None) -> WorkerTelemetry:
    """The worker's chips and their holders (raises on a failed probe)."""
    return parse(await _ask(pooled, "chips", timeout))


async def stop_holders(pooled: _Pooled, pids: list[int], grace: float) -> list[int]:
    """End ``pids`` (only those still holding a chip): SIGTERM, ``grace`` s, SIGKILL. Returns
    the pids that still hold a chip afterwards."""
    grace_ms = max(0, int(grace * 1000))
    words = " ".join(str(int(p)) for p in pids)
    answer = await _ask(pooled, f"kill {grace_ms} {words}", grace + 30.0)
    return [int(p) for p in answer.get("left", [])]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    n = _number(value)
    return int(n) if n is not None else None


def parse(value: dict[str, Any]) -> WorkerTelemetry:
    chips = tuple(
        ChipReading(
            index=int(c.get("index", i)),
            duty=_number(c.get("duty")),
            hbm_used=_int(c.get("hbm_used")),
            hbm_total=_int(c.get("hbm_total")),
            holders=tuple(int(p) for p in c.get("holders", ())),
        )
        for i, c in enumerate(value.get("chips") or ())
        if isinstance(c, dict)
    )
    holders = tuple(
        TpuHolder(
            pid=int(h["pid"]),
            command=str(h.get("command", "?")),
            user=str(h.get("user", "?")),
            age=_number(h.get("age")),
            device=str(h.get("device", "")),
            slot=str(h["slot"]) if h.get("slot") is not None else None,
            run_id=str(h["run_id"]) if h.get("run_id") is not None else None,
        )
        for h in value.get("holders") or ()
        if isinstance(h, dict) and "pid" in h
    )
    return WorkerTelemetry(chips=chips, holders=holders, metrics=str(value.get("metrics", "")))


async def with_chips(pooled: _Pooled, index: int, directory: str) -> WorkerProbe:
    """The workload's probe of one worker and its chips. Once the chip probe has answered, one
    request on its channel brings both (it asks the wrapper on the worker); before that (it is
    starting) or when that fails, the wrapper's own channel is asked at the same time as the
    chip probe. A failed chip probe leaves the workload's probe as it is, its chips unknown
    (``metrics`` says why): telemetry never makes a worker *unknown*."""
    if _channel(pooled).ready:
        try:
            line = await _ask_line(pooled, f"probe {directory}", CHIPS_TIMEOUT)
            state, _, chips = line.decode("utf-8", "replace").partition("\t")
            if state.startswith("state="):
                return replace(parse_probe(index, state), telemetry=parse(json.loads(chips)))
        except (ValueError, TypeError, KeyError, asyncssh.Error, OSError, EOFError):
            pass  # asked the two-channel way below
    return await _with_chips(pooled, index, pooled.ask(f"probe {directory}", None))


async def _with_chips(pooled: _Pooled, index: int, wrapper_answer: Awaitable[str]) -> WorkerProbe:
    chips_task = asyncio.ensure_future(read(pooled, CHIPS_TIMEOUT))
    try:
        probe = parse_probe(index, await wrapper_answer)
    except BaseException:
        chips_task.cancel()
        raise
    try:
        telemetry = await chips_task
    except (WorkloadError, asyncssh.Error, OSError, EOFError) as exc:
        telemetry = WorkerTelemetry(metrics=f"chip probe failed: {exc}")
    return replace(probe, telemetry=telemetry)


async def clear_before_launch(
    pool: WorkerPool, node: Node, slot: str, *, take: bool, grace: float
) -> str:
    """Before a launch: find the processes holding the chips that are not ``slot``'s
    workload. None: "". Some, ``take`` off: raises ``WorkloadError`` naming the first ("TPU
    held by pid 4242 `python3` (user alice, 2h) on worker 0"); the launch waits. ``take`` on:
    stops them (SIGTERM, ``grace``, SIGKILL) and says which, or raises if one is left."""

    async def look(pooled: _Pooled, worker: Worker) -> WorkerTelemetry:
        return await read(pooled, CHIPS_TIMEOUT)

    seen = await pool._everywhere(node, "reading the chips of", look, slot=slot)
    workers = pool.workers(node)
    found = strays(
        slot,
        [
            (w.index, t if isinstance(t, WorkerTelemetry) else None)
            for w, t in zip(workers, seen, strict=True)
        ],
    )
    if not found:
        return ""
    text = holders_text(found)
    if not take:
        raise WorkloadError(f"{text}: the launch waits (workload.take_tpu stops it)", delay=15.0)
    by_worker: dict[int, list[int]] = {}
    for index, holder in found:
        by_worker.setdefault(index, []).append(holder.pid)

    async def end(pooled: _Pooled, worker: Worker) -> list[int]:
        pids = by_worker.get(worker.index)
        return await stop_holders(pooled, pids, grace) if pids else []

    left = await pool._everywhere(node, "stopping the TPU holders on", end, slot=slot)
    stuck = [
        (w.index, pid)
        for w, pids in zip(workers, left, strict=True)
        if isinstance(pids, list)
        for pid in pids
        if pid in by_worker.get(w.index, [])
    ]
    failed = [str(o) for o in left if not isinstance(o, list)]
    if stuck or failed:
        what = ", ".join(f"pid {p} on worker {i}" for i, p in stuck) or "; ".join(failed)
        raise WorkloadError(f"{text}: could not stop it ({what})", delay=15.0)
    pids = ", ".join(f"{h.pid} `{h.command}` on worker {i}" for i, h in found)
    return f"take_tpu stopped {pids}"
