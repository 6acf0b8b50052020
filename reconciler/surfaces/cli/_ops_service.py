"""``tpu-reconciler service install|uninstall|status``: the systemd user unit for ``run``.

``install`` writes the unit (``runtime.service``) and prints the ``systemctl --user`` commands
that start it; only ``--now`` runs them. ``uninstall`` stops and disables the unit (when
systemctl is there) and removes the file. ``status`` says whether the unit file exists, whether
it is what ``install`` would write now, and what systemd thinks of it.

``install --shared GROUP`` also makes the state directory a lab's (``adapters/lab_layout``):
the group's, setgid and sticky, the controller's own files in a ``controller/`` only the
installing user writes, a sticky ``inbox/`` for members' confirmations, a members' directory
beside the desired file, and a policy file owned by the installing user.

May: write/remove the unit file, run systemctl --user, print. May not: touch the state dir
(but for ``install --shared``, through ``adapters/lab``).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.exitcodes import EX_NOT_RUNNING, EX_OK, EX_REFUSED
from reconciler.surfaces.cli._say import err


def _spec(args: argparse.Namespace, env: dict[str, str]) -> tuple[Any, str, Path]:
    """(UnitSpec, unit name, unit path) for the -f file and state dir of ``args``."""
    from reconciler.runtime import service
    from reconciler.surfaces.cli._reconcile import state_dir

    python = os.path.abspath(sys.executable)
    desired = Path(args.file).expanduser().resolve()
    spec = service.UnitSpec(
        python=python,
        desired_file=desired,
        state_dir=state_dir(args).root.expanduser().resolve(),
        environment=service.carried_environment(env),
        pythonpath=service.pythonpath_for(python, env),
        shared=bool(getattr(args, "shared", None)),
    )
    name = service.unit_name(service.instance_name(desired))
    return spec, name, service.unit_dir(env) / name


def _err(message: str) -> int:
    err(message)
    return EX_REFUSED


def _refusals(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A ServiceError (a refusal with its reason) becomes a message and exit code 1."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from reconciler.errors import ServiceError

        try:
            return command(args)
        except ServiceError as e:
            return _err(str(e))

    return run


def _warn_if_invalid(path: Path, env: dict[str, str]) -> None:
    from reconciler.runtime.desired_loader import DesiredLoader

    errors = DesiredLoader(path, env).load().errors
    if errors:
        print(
            f"note: {path} is invalid now ({errors[0]}); the controller will wait for a valid "
            "file (tpu-reconciler validate)"
        )


def _share(args: argparse.Namespace, spec: Any) -> None:
    """``--shared GROUP``: the lab's state directory, members' directory and policy file
    (adapters/lab_layout)."""
    from reconciler.adapters.lab import policy_path, read_policy, user_name
    from reconciler.adapters.lab_layout import make_shared
    from reconciler.adapters.member_files import members_dir
    from reconciler.adapters.statedir import StateDir
    from reconciler.errors import ServiceError, UnsafeName
    from reconciler.model.names import check_user
    from reconciler.runtime.lock import read_holder

    state = StateDir(spec.state_dir)
    try:
        admins = [check_user(a) for a in args.admin or [user_name(os.geteuid())]]
    except UnsafeName as e:
        raise ServiceError(f"--admin: {e}") from None
    if state.root.is_dir() and not state.lab and read_holder(state) is not None:
        raise ServiceError(
            f"a controller is running on {state.root}: stop it first (its files move into "
            f"{state.root}/controller/), then run this again"
        )
    done = make_shared(state, args.shared, admins=admins, desired=spec.desired_file)
    print(
        f"shared: {state.root} belongs to group {done.group} (setgid, sticky); the "
        f"controller's own files in {state.private} (only you write there), members' "
        f"confirmations through {state.inbox}; policy {policy_path(state)} "
        f"{'written' if done.policy_written else 'kept as it is'}"
    )
    members = members_dir(spec.desired_file)
    print(
        f"members: each keeps their slots in {members}/<user>.yaml (theirs alone); "
        f"{spec.desired_file} holds the lab-wide settings and only you change it"
    )
    layout = done.layout
    if layout.moved:
        print(f"moved into {state.private}: {', '.join(layout.moved)}")
    for name in layout.left:
        print(f"note: {state.root / name} is not yours: left where it is and not used (rm it)")
    for name in layout.set_aside:
        print(f"note: {state.root / name} was not yours: set aside, not used (rm -r it)")
    for line in done.notes:
        print(f"note: {line}")
    problem = read_policy(state).problem
    if problem is not None:
        print(f"note: the policy grants nothing until it is fixed: {problem}")


def _emulator(args: argparse.Namespace, env: dict[str, str], spec: Any) -> str | None:
    """Why the unit would run against the emulator or the demo (one line), unless allowed."""
    from reconciler.runtime.service_env import emulator_settings

    found = emulator_settings(env, desired_file=spec.desired_file, state_dir=spec.state_dir)
    if not found:
        return None
    if args.allow_emulator:
        print(f"note: the unit keeps emulator/demo settings (--allow-emulator): {'; '.join(found)}")
        return None
    return (
        f"refusing to write the emulator or the demo into the unit: {'; '.join(found)}; run "
        "it from a shell without them (a new one, not the demo's exports), or pass "
        "--allow-emulator"
    )


@_refusals
def install_command(args: argparse.Namespace) -> int:
    from reconciler.runtime import service

    env = dict(os.environ)
    if not Path(args.file).is_file():
        return _err(f"{args.file} does not exist: write it first (tpu-reconciler init)")
    spec, name, path = _spec(args, env)
    refusal = _emulator(args, env, spec)
    if refusal:
        return _err(refusal)
    if args.shared:
        _share(args, spec)
    change = service.write_unit(path, service.unit_text(spec), force=args.force)
    print(f"{change} {path}")
    _warn_if_invalid(Path(args.file), env)
    if env.get("CLOUDSDK_AUTH_ACCESS_TOKEN"):
        print("note: CLOUDSDK_AUTH_ACCESS_TOKEN is not copied into the unit (it is a secret)")
    steps = [["daemon-reload"], ["enable", "--now", name]]
    if not args.now:
        print("next: systemctl --user daemon-reload && systemctl --user enable --now " + name)
        print(f"then: tpu-reconciler -f {spec.desired_file} status --watch")
        print("      (loginctl enable-linger $USER keeps it running while you are logged out)")
        return EX_OK
    systemctl = service.systemctl_path(env)
    if systemctl is None:
        return _err("systemctl not found: start the unit yourself")
    for step in steps:
        rc, out = service.systemctl(systemctl, step, env)
        if rc != 0:
            return _err(f"systemctl --user {' '.join(step)} failed: {out}")
    print(f"started {name}")
    return EX_OK


@_refusals
def uninstall_command(args: argparse.Namespace) -> int:
    from reconciler.runtime import service

    env = dict(os.environ)
    _, name, path = _spec(args, env)
    systemctl = service.systemctl_path(env)
    if path.exists() and systemctl is not None:
        rc, out = service.systemctl(systemctl, ["disable", "--now", name], env)
        if rc != 0:
            print(f"warning: systemctl --user disable --now {name}: {out}", file=sys.stderr)
    removed = service.remove_unit(path, force=args.force)
    if not removed:
        print(f"not installed: {path}")
        return EX_OK
    if systemctl is not None:
        service.systemctl(systemctl, ["daemon-reload"], env)
    print(f"removed {path}")
    return EX_OK


@_refusals
def status_command(args: argparse.Namespace) -> int:
    from reconciler.runtime import service

    env = dict(os.environ)
    spec, name, path = _spec(args, env)
    print(f"unit: {name}")
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        print(f"file: {path} (not installed: tpu-reconciler service install)")
        return EX_NOT_RUNNING
    same = current == service.unit_text(spec)
    print(f"file: {path} ({'current' if same else 'differs from a fresh install: re-run it'})")
    systemctl = service.systemctl_path(env)
    if systemctl is None:  # nothing can say it runs: not running, as the docs promise
        print("systemd: systemctl not found (nothing runs the unit here)")
        return EX_NOT_RUNNING
    state = service.unit_state(systemctl, name, env)
    if isinstance(state, str):
        print(f"systemd: unavailable ({state})")
        return EX_NOT_RUNNING
    print(
        f"systemd: {state['ActiveState'] or '?'} ({state['SubState'] or '?'}), "
        f"{state['UnitFileState'] or 'unknown'}, pid {state['MainPID'] or '-'}, "
        f"restarts {state['NRestarts'] or '0'}"
    )
    return EX_OK if state["ActiveState"] == "active" else EX_NOT_RUNNING
