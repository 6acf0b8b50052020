"""The spine commands: ``validate``, ``plan``, ``apply``, ``run``, ``status``.

Handlers stay thin: they load, call ``runtime`` / ``core``, print what ``format_*`` returns and
choose the exit code. Heavy imports happen inside handlers so ``status`` stays fast.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.exitcodes import EX_CHANGES, EX_CONFIG, EX_OK, EX_REFUSED
from reconciler.model.vocabulary import BACKENDS, DEFAULT_BACKEND
from reconciler.surfaces.cli._say import err as _err
from reconciler.surfaces.cli._say import note as _note

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from reconciler.adapters.statedir import StateDir
    from reconciler.model.status import StatusSnapshot
    from reconciler.runtime.controller import Controller
    from reconciler.runtime.lock import ControllerLock


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate",
        help="check desired.yaml; print FILE:LINE:COL errors",
        description="Check desired.yaml (or FILE) and print every problem as "
        "FILE:LINE:COL: message. --resolved prints the intent as the controller sees it "
        "instead.",
    )
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        metavar="FILE",
        help="the file to check (default: the global -f FILE, else desired.yaml)",
    )
    p.add_argument(
        "--resolved",
        action="store_true",
        help="print the resolved intent as YAML: generators expanded, defaults and "
        "TPU_RECONCILER_* overrides applied",
    )
    p.set_defaults(handler=f"{__name__}:validate")

    p = sub.add_parser("plan", help="observe once and show what the controller would do")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 0 when there are no changes, 2 when there are, 1 on error",
    )
    p.set_defaults(handler=f"{__name__}:plan_cmd")

    p = sub.add_parser("apply", help="one reconcile pass: observe, plan, act, wait")
    p.add_argument("--yes", action="store_true", help="allow deleting running TPUs unasked")
    p.add_argument(
        "--wait",
        action="store_true",
        help="keep applying until nothing is left to do and nothing is moving",
    )
    p.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds --wait may take (default 1800)"
    )
    p.set_defaults(handler=f"{__name__}:apply_cmd")

    p = sub.add_parser("run", help="run the controller until interrupted")
    p.set_defaults(handler=f"{__name__}:run_cmd")

    p = sub.add_parser("status", help="what is held right now: desired against observed")
    p.add_argument("--json", action="store_true", help="print the status document as JSON")
    p.add_argument("--live", action="store_true", help="observe now instead of the snapshot")
    p.add_argument("--watch", action="store_true", help="keep the view up to date (Ctrl-C quits)")
    p.add_argument(
        "--interval", type=float, default=2.0, help="seconds between --watch refreshes (default 2)"
    )
    p.add_argument(
        "--owner", metavar="USER", default=None, help="only the slots USER holds (owner:)"
    )
    p.set_defaults(handler=f"{__name__}:status_cmd")

    p = sub.add_parser("demo", help="see it work in a minute on the built-in emulator")
    p.add_argument("--keep", action="store_true", help="leave it running to explore")
    p.add_argument(
        "--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help="cloud backend to use"
    )
    p.add_argument("--speed", type=float, default=20.0, help="emulator clock speed factor")
    p.set_defaults(handler="reconciler.surfaces.demo:run")


# --- shared ---------------------------------------------------------------------------------


@contextlib.contextmanager
def one_shot() -> Iterator[None]:
    """For a command that reads, prints and exits (``status``, ``validate``, an edit):
    everything it allocates (modules, a 1,000-slot file or snapshot, their values) lives until
    the process ends and forms no garbage cycles to speak of, yet the cyclic collector would
    traverse it all every few thousand allocations and again at exit (~10 % of ``status`` at
    1,000 slots: ~35 M instructions; as much of ``validate`` and of an edit). So no collection
    while it runs, and what is left is frozen (gc.freeze), which the collections at exit skip."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def state_dir(args: argparse.Namespace) -> StateDir:
    from reconciler.adapters.statedir import StateDir, default_state_dir

    root = args.state_dir or default_state_dir(args.file)
    return StateDir(Path(root))


def setup_logging(args: argparse.Namespace) -> None:
    import logging

    level = logging.ERROR if args.quiet else (logging.DEBUG if args.verbose else logging.INFO)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from reconciler.surfaces.cli._run_report import quiet_libraries

    quiet_libraries(args.verbose)


def _load_or_report(path: Path, store: Any = None, *, members_may_fail: bool = False) -> Any:
    """The Desired in the file now, or None after printing its diagnostics. Pass the
    controller's store so the pass that follows reuses this parse (it caches by content).
    ``members_may_fail`` (``plan``, ``apply``): a lab member's file that is wrong now is said as
    a warning and left out (its version in force, if any, stays), as the controller does; the
    shared file must be valid."""
    from reconciler.runtime.desired_loader import DesiredLoader

    loader = store or DesiredLoader(path, os.environ)
    result = loader.load()
    if not result.errors:
        return result.desired
    theirs = [d for d in result.errors if Path(d.file).parent == loader.members]
    if members_may_fail and result.desired is not None and len(theirs) == len(result.errors):
        for d in theirs:
            print(f"warning: {d} (that file's last valid version stays in force)", file=sys.stderr)
        return result.desired
    for d in result.errors:
        print(d, file=sys.stderr)
    return None


def build_controller(
    args: argparse.Namespace,
    *,
    allow_destructive: bool,
    history: bool = False,
    lock: ControllerLock | None = None,
) -> Controller:
    """The controller of ``args.file`` (see ``runtime.assemble``: the demo builds its own there)."""
    from reconciler.runtime.assemble import build_controller as assemble

    return assemble(
        args.file,
        state_dir(args).ensure(),
        allow_destructive=allow_destructive,
        history=history,
        lock=lock,
    )


# --- handlers -------------------------------------------------------------------------------


def validate(args: argparse.Namespace) -> int:
    with one_shot():
        return _validate(args)


def _validate(args: argparse.Namespace) -> int:
    if getattr(args, "path", None):
        args.file = args.path  # ``validate other.yaml`` checks that file, as -f would
    desired = _load_or_report(args.file)
    if desired is None:
        return EX_REFUSED
    from reconciler.model.tpu_zones import catalogue_warnings

    for warning in catalogue_warnings([(s.name, s.zone, s.accelerator) for s in desired.slots]):
        print(f"{args.file}: warning: {warning}", file=sys.stderr)
    for note in desired.notes:  # another spelling of an accelerator, and the name sent
        print(note, file=sys.stderr)
    from reconciler.model.load_warnings import setup_warnings

    try:
        text = Path(args.file).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        text = ""  # it was just read: gone since, the warnings are left out
    for diag in setup_warnings(text, desired) if text else ():
        print(diag, file=sys.stderr)
    if getattr(args, "resolved", False):
        from reconciler.model.load import ENV_PREFIX, env_overrides
        from reconciler.model.resolved import format_resolved

        from_env = {name: ENV_PREFIX + name.upper() for name in env_overrides(os.environ)}
        if os.environ.get(ENV_PREFIX + "PROJECT"):
            from_env["project"] = ENV_PREFIX + "PROJECT"
        print(format_resolved(desired, from_env), end="")
        return EX_OK
    slots, groups = len(desired.slots), len(desired.race_groups)
    print(
        f"{args.file}: valid ({slots} slot{'' if slots == 1 else 's'}, "
        f"{groups} race group{'' if groups == 1 else 's'})"
    )
    return EX_OK


def _plan_once(args: argparse.Namespace) -> tuple[Any, Any]:
    """Observe once and plan; the cloud connection is closed again before returning."""
    import asyncio

    controller = build_controller(args, allow_destructive=False)
    if _load_or_report(args.file, controller.store, members_may_fail=True) is None:
        return None, None

    async def once() -> Any:
        try:
            return await controller.observe_and_plan()
        finally:
            await controller.drain()

    return controller, _observe_or_report(lambda: asyncio.run(once()))


def _observe_or_report(call: Any) -> Any:
    from reconciler.errors import ReconcilerError

    try:
        return call()
    except ReconcilerError as e:
        _err(f"could not observe: {e}")
        return None


def plan_cmd(args: argparse.Namespace) -> int:
    from reconciler.core.capacity_report import format_waits, waits_list
    from reconciler.core.render import format_plan
    from reconciler.core.status import plan_dict
    from reconciler.runtime.history_reads import expected_waits

    _, result = _plan_once(args)
    if result is None:
        return EX_REFUSED
    waits = expected_waits(state_dir(args).history, result.desired, result.observation)
    if args.json:
        doc = {"schema_version": "tpu-reconciler.plan.v1", **plan_dict(result.plan)}
        doc["unmanaged"] = [
            {"name": r.name, "zone": r.zone, "state": r.api_state} for r in result.plan.unmanaged
        ]
        if waits:
            doc["expected_waits"] = waits_list(waits)
        import json  # here: `status` reads a cached snapshot without the JSON parser

        print(json.dumps(doc, indent=2))
    else:
        print(format_plan(result.plan, now=time.time()), end="")
        if waits:
            print("\n" + format_waits(waits), end="")
    if args.detailed_exitcode and not result.plan.empty:
        return EX_CHANGES
    return EX_OK


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} Only 'yes' will be accepted: ").strip() == "yes"
    except EOFError:
        return False


def apply_cmd(args: argparse.Namespace) -> int:
    import asyncio

    from reconciler.errors import ControllerAlreadyRunning, NotPermitted
    from reconciler.exitcodes import EX_INTERRUPTED
    from reconciler.runtime.lock import ControllerLock
    from reconciler.surfaces.cli._apply_report import ActionReport

    report = ActionReport()  # on Ctrl-C: what reached the cloud
    try:
        with ControllerLock(state_dir(args).ensure(), desired=args.file):
            controller = build_controller(args, allow_destructive=True)
            controller.events.listeners.append(report)
            if _load_or_report(args.file, controller.store, members_may_fail=True) is None:
                return EX_REFUSED
            done = _observe_or_report(
                lambda: asyncio.run(_apply(controller, args.yes, args.wait, args.timeout))
            )
    except KeyboardInterrupt:
        for line in report.lines():
            _note(line)
        return EX_INTERRUPTED
    except ControllerAlreadyRunning as e:
        _err(f"{e} — it applies desired.yaml itself; use `status` to watch it")
        return EX_REFUSED
    except NotPermitted as e:  # a lab member on the lab's state directory
        _err(str(e))
        return e.exit_code
    if done is None:
        return EX_REFUSED
    if done is _CANCELLED:
        _err("apply cancelled: destructive actions need --yes or an interactive yes")
        return EX_REFUSED
    failed = [k for k, v in done.items() if v]
    for key in failed:
        print(f"  failed {key}: {done[key]}", file=sys.stderr)
    if done:
        print(f"Apply complete: {len(done) - len(failed)} succeeded, {len(failed)} failed.")
    return EX_REFUSED if failed else EX_OK


_CANCELLED: dict[str, str | None] = {}


async def _apply(
    controller: Controller, yes: bool, wait: bool = False, timeout: float = 1800.0
) -> dict[str, str | None]:
    """Plan, show, confirm destructive actions, carry out exactly what was shown. With
    ``wait``, repeat until the plan is empty and nothing is moving, showing progress."""
    import asyncio

    from reconciler.core.plan import in_motion
    from reconciler.core.render import format_plan

    results: dict[str, str | None] = {}
    confirmed: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while True:
            result = await controller.observe_and_plan()
            if result.plan is None or result.observation is None:
                return results
            if not result.plan.empty:  # shown before anything is done, even through a pipe
                print(format_plan(result.plan, now=time.time()), end="", flush=True)
                destructive = {a.slot for a in result.plan.actions if a.destructive}
                if destructive - confirmed and not yes:
                    names = ", ".join(sorted(destructive - confirmed))
                    if not _confirm(f"\nThis deletes running TPUs ({names}). Continue?"):
                        return _CANCELLED
                    confirmed |= destructive
                for a in await controller.apply(result):
                    error = controller.memory.error(a.key)
                    results[a.key] = error.message if error else None
                if not wait:
                    return results
            elif not wait or not in_motion(result.desired, result.observation, result.plan.races):
                if not results:
                    print(format_plan(result.plan, now=time.time()), end="")
                controller.write_snapshot(result)
                return results
            else:
                _progress(result)
            if time.monotonic() > deadline:
                _err(f"--wait gave up after {timeout:g}s; the controller would carry on")
                results["(timeout)"] = "timed out"
                return results
            assert result.desired is not None
            await asyncio.sleep(result.desired.settings.fast_poll_interval)
    finally:
        await controller.drain()


def _progress(result: Any) -> None:
    from reconciler.model.capacity import MOVING_STATES

    moving = sorted(
        f"{r.name} {r.api_state}"
        for r in result.observation.requests
        if r.state in MOVING_STATES and result.desired and result.desired.slot(r.name)
    )
    line = ", ".join(moving) or "waiting for the next step"
    print(f"… {line}", file=sys.stderr, flush=True)


def run_cmd(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from reconciler.errors import ControllerAlreadyRunning, NotPermitted
    from reconciler.runtime.lock import ControllerLock

    setup_logging(args)
    try:
        state = state_dir(args).ensure()
    except OSError as e:
        _err(f"cannot use the state directory: {e}")
        return EX_CONFIG
    try:
        with ControllerLock(state, desired=args.file) as lock:
            controller = build_controller(args, allow_destructive=True, history=True, lock=lock)
            if not args.quiet:  # the file's problems on stderr as they happen, not only logged
                from reconciler.surfaces.cli._run_report import IntentReport

                controller.events.listeners.append(IntentReport(str(args.file), _note))

            async def main() -> None:
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                await controller.run(stop)

            if not args.quiet:
                print(
                    f"tpu-reconciler: controlling {args.file} (state in {controller.state.root});"
                    " Ctrl-C stops",
                    file=sys.stderr,
                )
            asyncio.run(main())
    except (ControllerAlreadyRunning, NotPermitted) as e:
        _err(str(e))
        return e.exit_code
    except OSError as e:  # a state directory made read-only or full under us
        _err(f"cannot use the state directory {state.root}: {e.strerror or e}")
        return EX_CONFIG
    if controller.unsaved is not None:  # stopped, but its memory could not be kept
        _err(
            f"stopped without saving its state in {state.root}: "
            f"{controller.unsaved.strerror or controller.unsaved}; make it writable before "
            "the next start"
        )
        return EX_CONFIG
    return EX_OK


def read_status(args: argparse.Namespace) -> StatusSnapshot:
    """The snapshot ``status`` shows (see ``_snapshot.current_status``)."""
    from reconciler.surfaces.cli._snapshot import current_status

    return current_status(args)


def status_cmd(args: argparse.Namespace) -> int:
    if args.watch:
        from reconciler.surfaces.cli._live import watch

        return watch(args)
    if args.live:
        doc = _live_status(args)
        if doc is None:
            return EX_REFUSED
        from reconciler.surfaces.cli._snapshot import for_owner

        return _print_status(args, for_owner(args, doc))
    with one_shot():
        return _print_status(args, read_status(args))


def _print_status(args: argparse.Namespace, doc: StatusSnapshot) -> int:
    if args.json:
        from reconciler.core.json_text import indented
        from reconciler.model.status import to_json

        print(indented(to_json(doc)))
    else:
        from reconciler.core.render import format_status

        print(format_status(doc, time.time()), end="")
    return EX_OK


def _live_status(args: argparse.Namespace) -> StatusSnapshot | None:
    from dataclasses import replace

    from reconciler.core.status import build_status
    from reconciler.model.status import ControllerInfo
    from reconciler.runtime.history_reads import store_hints
    from reconciler.runtime.lock import read_holder

    controller, result = _plan_once(args)
    if result is None:
        return None
    now = time.time()
    snapshot = build_status(
        desired=result.desired,
        desired_file=str(args.file),
        errors=[],
        observation=result.observation,
        observed_at=now,
        memory=controller.memory,
        plan=result.plan,
        now=now,
        backend=controller.backend,
        wait_hints=store_hints(controller.state.history),
    )
    pid = read_holder(controller.state)
    return replace(snapshot, controller=ControllerInfo(pid is not None, pid))
