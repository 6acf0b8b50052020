"""``tpu-reconciler logs SLOT [--worker N] [--attempt K] [--follow] [--lines N] [--raw]``: the
output of a slot's workload, every worker's lines interleaved as they arrive, each prefixed
``[wN]``, its terminal escapes shown as ``\\x1b...`` (``core/terminal_text``) unless ``--raw``.

The node (instance and one IP per worker) comes from the controller's status snapshot; the run
id from the snapshot's ``slots[].workload.run_id`` when the controller recorded one, else each
worker's own record of its latest launch (``~/.tpu-reconciler/w<N>/<slot>/current``), which
is also how an older attempt is found with ``--attempt``. ``--follow`` keeps printing, moves
on to every later attempt launched on the workers, and to a re-created node (a preemption)
once the snapshot shows it. SSH settings (user, key, port, internal IPs) are those of the
desired file, exactly as the controller uses them.

Everything that can be known without the network is checked first, each answered with one
line and a named exit code: a slot neither in the desired file nor in the snapshot
(``EX_REFUSED``, with "did you mean"), a slot without a workload (``EX_REFUSED``), no node now
(``EX_TEMPFAIL``), an emulated node's address — a documentation range, nothing answers there
(``NoMachine``, ``EX_UNAVAILABLE``). Only then is the OS Login user found (``settings.ssh_user``,
else the cache, else one lookup of a few seconds, unless a recent one failed:
``oslogin.UserResolver``; a failure is ``EX_UNAVAILABLE`` naming ``settings.ssh_user``), and
the workers are dialled (an unreachable one is ``EX_UNAVAILABLE`` too).

May: read the state dir and the desired file, read logs on the workers through
``intent.log_stream``, print. May not: launch, stop or edit anything.
asyncssh is imported inside the handler only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import (
    EX_CONFIG,
    EX_OK,
    EX_REFUSED,
    EX_TEMPFAIL,
    EX_UNAVAILABLE,
    EX_USAGE,
)
from reconciler.intent.log_target import Target, target_of
from reconciler.surfaces.cli._say import err as _err
from reconciler.surfaces.cli._say import note as _note

if TYPE_CHECKING:
    from reconciler.intent.log_stream import UserResolver, WorkloadRunner
    from reconciler.model.desired import Desired
    from reconciler.model.status import StatusSnapshot

_HERE: Final = "reconciler.surfaces.cli._logs"
#: Seconds between looks at the snapshot while following (has the node been re-created?).
_RECHECK: Final = 5.0
#: Lines shown from the first attempt on a re-created node: all of them, practically.
_WHOLE: Final = 100_000
#: Seconds to wait for a worker's TCP connect: a person is waiting at the prompt.
_CONNECT_TIMEOUT: Final = 5.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "logs",
        help="print a slot's workload output from its workers ([wN] prefixes; --follow)",
        description="Print the output of SLOT's workload on its workers, interleaved, each "
        "line prefixed [wN]. Reads the node from the controller's status snapshot.",
    )
    p.add_argument("slot", metavar="SLOT", help="the slot whose workload to show")
    p.add_argument("--worker", type=int, default=None, metavar="N", help="only worker N")
    p.add_argument(
        "--attempt", type=int, default=None, metavar="K", help="attempt K (default: the latest)"
    )
    p.add_argument("--lines", "-n", type=int, default=20, metavar="N", help="last N lines (20)")
    p.add_argument(
        "--follow", "-F", action="store_true", help="keep printing new output, across relaunches"
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="write the workload's control characters (colours, cursor moves, titles, OSC 52) "
        "to the terminal as they are; by default they are shown escaped (\\x1b...)",
    )
    p.set_defaults(handler=f"{_HERE}:logs_command")


def unknown_slot(desired: Desired | None, snapshot: StatusSnapshot | None, slot: str) -> str | None:
    """Why ``slot`` is no slot at all (neither in the desired file nor in the snapshot, with
    the closest name when one is close), or None when it is one (or nothing can tell)."""
    import difflib

    if desired is None and snapshot is None:
        return None
    known = [s.name for s in desired.slots] if desired else []
    known += [s.name for s in (snapshot.slots if snapshot else ()) if s.name not in known]
    known += [g.name for g in desired.race_groups if g.workload] if desired else []
    if slot in known:
        return None
    close = difflib.get_close_matches(slot, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown slot {slot!r}: not in the desired file nor in the controller's snapshot{hint}"


def no_workload(desired: Desired, snapshot: StatusSnapshot | None, slot: str) -> str | None:
    """Why ``slot`` has no workload output to show (no ``workload:`` block, and the snapshot
    knows of no run), or None when it has (or had) one."""
    spec = desired.slot(slot)
    if spec is not None and spec.workload is not None:
        return None
    if any(g.name == slot and g.workload for g in desired.race_groups):
        return None  # one program across the group's winners
    row = next((s for s in (snapshot.slots if snapshot else ()) if s.name == slot), None)
    if row is not None and row.workload is not None and row.workload.run_id:
        return None  # removed from the file, but a run is known: its output may be read
    return (
        f"{slot} has no workload: nothing was launched there to show (give it one with "
        f"`tpu-reconciler workload set {slot} --command ...`)"
    )


def _resolver(args: argparse.Namespace) -> UserResolver:
    from reconciler.intent.log_stream import user_resolver
    from reconciler.surfaces.cli._reconcile import state_dir

    return user_resolver(state_dir(args))


async def _print(stream: Any, raw: bool) -> int:
    """Print every line as it comes, its terminal escapes shown rather than obeyed unless
    ``raw``; returns how many."""
    from reconciler.intent.log_stream import log_text

    printed = 0
    async with contextlib.aclosing(stream):
        async for line in stream:
            text = f"[w{line.worker}] {line.text}" if raw else log_text(line.worker, line.text)
            sys.stdout.write(f"{text}\n")
            sys.stdout.flush()
            printed += 1
    return printed


async def _follow(
    runner: WorkloadRunner, args: argparse.Namespace, look: Callable[[], Target]
) -> int:
    """Follow the current node; when the snapshot shows another instance, switch to it."""
    target = look()
    lines, attempt, waiting = args.lines, args.attempt, False
    while True:
        node = target.node
        if node is None:
            if not waiting:
                _note(f"{target.reason}; waiting for it")
                waiting = True
            await asyncio.sleep(_RECHECK)
            target = look()
            lines, attempt = _WHOLE, None
            continue
        waiting = False
        stream = runner.logs(
            node,
            args.slot,
            worker=args.worker,
            attempt=attempt,
            lines=lines,
            follow=True,
            run_id=target.run_id,
        )
        task = asyncio.create_task(_print(stream, args.raw))
        while True:
            done, _ = await asyncio.wait({task}, timeout=_RECHECK)
            if done:
                task.result()  # a follow only ends by an error
                return EX_OK
            target = look()
            if target.node is None or target.node.instance != node.instance:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                _note(f"{args.slot}: the node changed; following the new one")
                lines, attempt = _WHOLE, None
                break


async def _main(args: argparse.Namespace) -> int:
    from reconciler.errors import (
        NoMachine,
        SetupFailed,
        StatusUnreadable,
    )
    from reconciler.intent.log_stream import check_node, workload_reader
    from reconciler.intent.status_view import read_snapshot as read_status
    from reconciler.surfaces.cli._reconcile import _load_or_report, state_dir

    path = state_dir(args).status

    def look() -> Target:
        try:
            return target_of(read_status(path), args.slot)
        except StatusUnreadable as exc:
            return Target(None, None, str(exc))

    desired = _load_or_report(args.file)
    if desired is None:
        return EX_CONFIG
    try:
        snapshot = read_status(path)
    except StatusUnreadable as exc:
        _err(str(exc))
        return EX_TEMPFAIL
    refusal = unknown_slot(desired, snapshot, args.slot) or no_workload(
        desired, snapshot, args.slot
    )
    if refusal:
        _err(refusal)
        return EX_REFUSED
    target = look()
    if target.node is None and not args.follow:
        _err(target.reason)
        return EX_TEMPFAIL
    user: str | Callable[[], Any] = desired.settings.ssh_user or ""
    try:
        if target.node is not None:  # about to dial: nothing answers there, or who are we?
            check_node(args.slot, target.node, desired)
            user = user or await _resolver(args).resolve()
        else:  # following a slot without a node yet: found when its node appears
            user = user or _resolver(args).resolve
    except (NoMachine, SetupFailed) as exc:
        _err(str(exc))
        return EX_UNAVAILABLE
    reader = workload_reader(desired, state_dir(args), user, connect_timeout=_CONNECT_TIMEOUT)
    async with reader as runner:
        return await _read(args, look, target, runner)


async def _read(
    args: argparse.Namespace, look: Callable[[], Target], target: Target, runner: WorkloadRunner
) -> int:
    from reconciler.errors import ReconcilerError, SetupFailed, WorkloadError

    try:
        if args.follow:
            return await _follow(runner, args, look)
        assert target.node is not None
        printed = await _print(
            runner.logs(
                target.node,
                args.slot,
                worker=args.worker,
                attempt=args.attempt,
                lines=args.lines,
                follow=False,
                run_id=target.run_id,
            ),
            args.raw,
        )
        if not printed and args.lines:
            _note(f"no workload output for {args.slot} on its workers (nothing launched yet?)")
        return EX_OK
    except (WorkloadError, SetupFailed) as exc:  # a worker that could not be read
        _err(str(exc))
        return EX_UNAVAILABLE
    except ReconcilerError as exc:
        _err(str(exc))
        return exc.exit_code
    finally:
        await runner.aclose()


def logs_command(args: argparse.Namespace) -> int:
    from reconciler.errors import UnsafeName
    from reconciler.model.names import check_name

    try:
        check_name(args.slot)
    except UnsafeName as exc:
        _err(str(exc))
        return EX_USAGE
    if args.lines < 0 or (args.worker is not None and args.worker < 0):
        _err("--lines and --worker take non-negative numbers")
        return EX_USAGE
    if args.attempt is not None and args.attempt < 1:
        _err("--attempt counts from 1")
        return EX_USAGE
    return asyncio.run(_main(args))
