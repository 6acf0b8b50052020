"""Commands for operating the controller for days: ``events``, ``doctor``, ``init``,
``service install|uninstall|status`` and ``completion bash|zsh``.

This module only declares the commands; each handler lives in a sibling ``_ops_*`` module and
is imported when chosen, so ``events`` never pays for what ``doctor`` imports.

May: declare arguments. May not: import anything heavier than argparse at module level.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

from reconciler.model.vocabulary import MODES
from reconciler.surfaces.cli._intent import max_run_flag

_PKG: Final = "reconciler.surfaces.cli"
#: As in reconciler.runtime.init, which is not imported here: it pulls in pydantic and ruamel.
DEFAULT_ZONE: Final = "us-central2-b"
DEFAULT_ACCELERATOR: Final = "v4-8"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "events",
        help="the controller's event log: transitions, actions, errors",
        description="Print the event log (oldest first), one line each, or JSON lines.",
    )
    p.add_argument("--follow", action="store_true", help="keep printing new events (Ctrl-C ends)")
    p.add_argument("--json", action="store_true", help="one tpu-reconciler.event.v1 JSON per line")
    p.add_argument("--slot", metavar="NAME", help="only events about this slot")
    p.add_argument(
        "--since", metavar="WHEN", help="only newer events: a duration (1h, 30m) or ISO-8601 time"
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="only the newest N (with --follow: of the history)"
    )
    p.set_defaults(handler=f"{_PKG}._ops_events:events_command")

    p = sub.add_parser(
        "doctor",
        help="read-only health checks, each problem with a fix",
        description="Check gcloud, credentials, the TPU API, desired.yaml, the state dir, the "
        "controller and its snapshot, tmux, the SSH agent, the OS Login user and the ntfy "
        "topic. Changes nothing. Exit 0 when healthy (warnings allowed), 1 otherwise.",
    )
    p.add_argument("--json", action="store_true", help="print a tpu-reconciler.doctor.v1 document")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per probe (default 20)")
    p.set_defaults(handler=f"{_PKG}._ops_doctor_init:doctor_command")

    p = sub.add_parser(
        "init",
        help="write a starter desired.yaml (asks on a terminal)",
        description="Write a starter desired.yaml (the -f file) with comments. Flags answer the "
        "questions; on a terminal the missing ones are asked. Never overwrites without --force.",
    )
    p.add_argument("--project", help="GCP project id")
    p.add_argument(
        "--zone", action="append", metavar="ZONE", help=f"zone (repeatable; default {DEFAULT_ZONE})"
    )
    p.add_argument(
        "--accelerator",
        action="append",
        metavar="TYPE",
        help=f"accelerator type, e.g. v4-8 or v6e-8 (repeatable; default {DEFAULT_ACCELERATOR})",
    )
    p.add_argument(
        "--mode", choices=MODES, help="spot (default), on-demand, reserved or flex-start"
    )
    max_run_flag(p)
    p.add_argument(
        "--race",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="race the zone x accelerator candidates, first one wins (default: when several)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(handler=f"{_PKG}._ops_doctor_init:init_command")

    group = sub.add_parser("service", help="run the controller as a systemd user service")
    actions = group.add_subparsers(dest="service_action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "install",
        help="write the user unit for this desired file",
        description="Write ~/.config/systemd/user/tpu-reconciler@<name>.service running "
        "`run` for the -f file with this interpreter, and print how to start it.",
    )
    p.add_argument("--now", action="store_true", help="also daemon-reload and enable --now it")
    p.add_argument("--force", action="store_true", help="replace a unit not written by this tool")
    p.add_argument(
        "--shared",
        metavar="GROUP",
        default=None,
        help="a lab's controller: give the state directory to GROUP (setgid, group read-write) "
        "and write its policy file (docs/security.md)",
    )
    p.add_argument(
        "--admin",
        metavar="USER",
        action="append",
        default=None,
        help="with --shared: a lab admin in a new policy file (repeatable; default: you)",
    )
    p.add_argument(
        "--allow-emulator",
        action="store_true",
        help="install even with emulator or demo settings in the environment (loopback API "
        "endpoints, the demo's gcloud config, token or files), which are refused otherwise",
    )
    p.set_defaults(handler=f"{_PKG}._ops_service:install_command")
    p = actions.add_parser("uninstall", help="stop, disable and remove the unit")
    p.add_argument("--force", action="store_true", help="remove a unit not written by this tool")
    p.set_defaults(handler=f"{_PKG}._ops_service:uninstall_command")
    p = actions.add_parser("status", help="is the unit installed, current, running?")
    p.set_defaults(handler=f"{_PKG}._ops_service:status_command")

    p = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description='Print a completion script: eval "$(tpu-reconciler completion bash)" in '
        '~/.bashrc, or tpu-reconciler completion zsh > "${fpath[1]}/_tpu-reconciler".',
    )
    p.add_argument("shell", choices=("bash", "zsh"))
    p.set_defaults(handler=f"{_PKG}._ops_completion:completion_command")
