"""``tpu-reconciler doctor`` and ``tpu-reconciler init``: thin handlers over
``intent/doctor_init``.

``doctor`` prints ``doctor_report``'s text (or its JSON document); exit 0 when no check
failed. ``init`` takes its answers from flags, asks for the
missing ones on a terminal, validates the result and writes it without replacing a file
unless ``--force``.

May: print, read the terminal. May not: change anything but the file ``init`` writes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.model.vocabulary import DEFAULT_MODE, FLEX_START, MODES
from reconciler.surfaces.cli._say import err


def doctor_command(args: argparse.Namespace) -> int:
    from reconciler.intent.doctor_init import doctor_report
    from reconciler.surfaces.cli._reconcile import state_dir

    report = doctor_report(args.file, state_dir(args).root, timeout=args.timeout)
    if args.json:
        print(json.dumps(report.document, indent=2))
    else:
        print(report.text, end="")
    return EX_OK if report.healthy else EX_REFUSED


# --- init --------------------------------------------------------------------------------------


def _ask(question: str, default: str, read: Callable[[str], str]) -> str:
    answer = read(f"{question} [{default}]: " if default else f"{question}: ").strip()
    return answer or default


def _split(text: str) -> list[str]:
    return [part for part in text.replace(",", " ").split() if part]


def _questions(args: argparse.Namespace, read: Callable[[str], str]) -> None:
    """Fill what the flags left open, asking on the terminal."""
    if not args.project:
        default = os.environ.get("CLOUDSDK_CORE_PROJECT", "")
        while not args.project:
            args.project = _ask("GCP project id", default, read)
    if not args.zone:
        args.zone = _split(_ask("Zones (space-separated)", "us-central2-b", read))
    if not args.accelerator:
        args.accelerator = _split(_ask("Accelerator types (e.g. v4-8 v6e-8)", "v4-8", read))
    if not args.mode:
        words = f"{', '.join(MODES[:-1])} or {MODES[-1]}"
        args.mode = _ask(f"Mode: {words}", DEFAULT_MODE, read)
    if args.mode == FLEX_START and not args.max_run_duration:
        args.max_run_duration = _ask("How long each flex-start run lasts (at most 7d)", "1d", read)
    if args.race is None and len(args.zone) * len(args.accelerator) > 1:
        answer = _ask("Race the candidates, first one wins? (y/n)", "y", read)
        args.race = answer.lower().startswith("y")


def init_command(args: argparse.Namespace) -> int:
    from reconciler.errors import InitError
    from reconciler.intent.doctor_init import write_starter

    path = args.file
    if path.exists() and not args.force:
        err(f"{path} exists; --force replaces it")
        return EX_REFUSED
    if sys.stdin.isatty():
        try:
            _questions(args, input)
        except EOFError:
            return EX_REFUSED
    elif not args.project:
        print(
            "tpu-reconciler init: --project is required when stdin is not a terminal",
            file=sys.stderr,
        )
        return EX_USAGE
    try:
        desired = write_starter(
            path,
            project=args.project,
            zones=tuple(args.zone or ("us-central2-b",)),
            accelerators=tuple(args.accelerator or ("v4-8",)),
            mode=args.mode or DEFAULT_MODE,
            race=args.race,
            max_run_duration=args.max_run_duration,
            force=args.force,
        )
    except InitError as e:
        err(str(e))
        return e.exit_code
    if not args.quiet:
        groups = len(desired.race_groups)
        print(
            f"wrote {path}: {len(desired.slots)} slot{'s' if len(desired.slots) != 1 else ''}"
            f"{', racing in 1 group' if groups else ''}\n"
            f"next: tpu-reconciler -f {path} plan   (what would happen)\n"
            f"      tpu-reconciler -f {path} run    (or: service install)"
        )
    return EX_OK
