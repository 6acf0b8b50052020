"""``init``: a starter desired.yaml from a few answers, with comments that explain each part.

``starter_text`` is pure: it checks every name with the same rules the schema uses (so nothing
unexpected is ever templated into YAML), lays out one slot per zone x accelerator (racing in
one group, or each held on its own), and ``parse_desired`` must accept the result before
anyone writes it. ``write_new`` never replaces an existing file unless told to.

May: write the one file it is given (atomically; O_EXCL when not forcing). May not: print, ask
questions (the CLI does), or touch anything else.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.files import atomic_write
from reconciler.errors import InitError, InvalidDesiredState, UnsafeName
from reconciler.model import accelerators, flex, names
from reconciler.model.desired import DEFAULT_IMAGES, DEFAULT_RUNTIME_VERSIONS, Desired
from reconciler.model.load import parse_desired
from reconciler.model.vocabulary import DEFAULT_MODE as DEFAULT_MODE
from reconciler.model.vocabulary import MODES as MODES

DEFAULT_ZONE: Final = "us-central2-b"
DEFAULT_ACCELERATOR: Final = "v4-8"
RACE_GROUP: Final = "first-tpu"


@dataclass(frozen=True, slots=True)
class Starter:
    project: str
    zones: tuple[str, ...] = (DEFAULT_ZONE,)
    accelerators: tuple[str, ...] = (DEFAULT_ACCELERATOR,)
    mode: str = DEFAULT_MODE
    race: bool | None = None  # None: race when there is more than one candidate
    max_run_duration: str | None = None  # mode flex-start (required there): each slot's run

    @property
    def racing(self) -> bool:
        return self.race if self.race is not None else len(self.candidates()) > 1

    def candidates(self) -> list[tuple[str, str, str]]:
        """(name, zone, accelerator) per zone x accelerator, in the order given."""
        return [
            (names.slot_name(self.mode, a, names.zone_code(z), 1), z, a)
            for z in self.zones
            for a in self.accelerators
        ]


def _unique(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in values if v.strip()))


def checked(starter: Starter) -> Starter:
    """The starter with names validated and duplicates dropped; raises InitError."""
    if starter.mode not in MODES:
        raise InitError(f"--mode must be one of {', '.join(MODES)}, got {starter.mode!r}")
    try:
        zones = tuple(names.check_zone(z) for z in _unique(starter.zones))
        accelerators = tuple(names.check_accelerator(a) for a in _unique(starter.accelerators))
        project = names.check_project(starter.project.strip())
    except UnsafeName as e:
        raise InitError(str(e)) from None
    if not zones or not accelerators:
        raise InitError("give at least one --zone and one --accelerator")
    _check_flex(starter.mode, starter.max_run_duration)
    return Starter(
        project, zones, accelerators, starter.mode, starter.race, starter.max_run_duration
    )


def _check_flex(mode: str, max_run: str | None) -> None:
    """``--max-run-duration``: required with flex-start (at most 7d), refused without it."""
    problem = flex.first_problem(mode, max_run, None)
    if problem is not None:
        hint = ": give --max-run-duration, e.g. 6h" if max_run is None else ""
        said = problem.replace("'max_run_duration'", "a max_run_duration")
        raise InitError(said.replace("max_run_duration: ", "--max-run-duration: ", 1) + hint)


_HEADER: Final = """\
# desired.yaml: what you want held. `tpu-reconciler run` makes it so and keeps it so;
# `tpu-reconciler status` shows desired against observed. Edit freely: an invalid or
# half-saved file changes nothing (the controller keeps the last valid intent and reports
# FILE:LINE:COL). `tpu-reconciler validate` checks it; docs/desired-reference.md lists every
# key. Durations: 30, "30s", "2m", "6h", "1d".

# GCP project that owns the TPUs.
project: {project}

settings:
  # rest: the v2 API over HTTPS (fast); gcloud: the installed CLI (seconds of CPU per call).
  backend: rest
  # How often to look at the cloud when nothing moves, and while anything is queued or racing.
  poll_interval: 30s
  fast_poll_interval: 5s
  # ntfy topic for "TPU is live / preempted" notices. Anyone who guesses the name reads them:
  # use a long random one, e.g. tpu-$(openssl rand -hex 12). Empty: no notices.
  ntfy_topic: ""

defaults:
  # spot | on-demand | reserved, for slots that do not say.
  mode: {mode}
  setup:
    # Run settings.setup_scripts on every worker over SSH (with agent forwarding).
    bootstrap: false
    # Join the node to your tailnet (store the key: tpu-reconciler secret set tailscale).
    tailscale: false
    # Keep a tmux window with SSH to worker 0 of every ACTIVE TPU (session tpu-<zone code>).
    tmux: true

"""

_RACE_INTRO: Final = """\
# Slots: each is one queued resource and TPU of the same name. These are race candidates: they
# have no `want`; the race group below decides which are held.
slots:
"""

_HELD_INTRO: Final = """\
# Slots: each is one queued resource and TPU of the same name.
#   want: held      keep it queued; queue it again when it is preempted or fails
#   want: released  delete it (deleting a running TPU is destructive: `apply` asks first)
# A slot removed from this file is only reported as unmanaged, never deleted.
slots:
"""

_RACE_TAIL: Final = """
# Queue every candidate until `count` of them are PROVISIONING or ACTIVE, then delete the rest.
# When a winner is lost (preempted), the race starts again. count: 0 releases them all.
race_groups:
  - name: {group}
    count: 1
    slots: [{slots}]
"""


def starter_text(starter: Starter) -> str:
    """The file for ``starter`` (validated first); raises InitError."""
    s = checked(starter)
    text = _HEADER.format(project=s.project, mode=s.mode)
    text += _RACE_INTRO if s.racing else _HELD_INTRO
    for i, (name, zone, accelerator) in enumerate(s.candidates()):
        text += f"  - name: {name}\n    zone: {zone}\n    accelerator: {accelerator}\n"
        if s.max_run_duration is not None:
            text += f"    max_run_duration: {s.max_run_duration}   # the TPU runs this long\n"
            if i == 0:
                text += "    # renew: true   # queue a new run once this one has ended\n"
        if not s.racing:
            text += "    want: held\n"
        if i == 0:
            text += "    # valid_until: 6h   # give up queueing after this long\n"
            family = names.accelerator_family(accelerator)
            if accelerators.default_api(family) == accelerators.COMPUTE_API:
                image = DEFAULT_IMAGES.get(family, "IMAGE")
                text += f"    # image: {image}   # default: by family (Compute Engine)\n"
            else:
                version = DEFAULT_RUNTIME_VERSIONS.get(family, "VERSION")
                text += f"    # runtime_version: {version}   # default: by accelerator family\n"
    if s.racing:
        slots = ", ".join(name for name, _, _ in s.candidates())
        text += _RACE_TAIL.format(group=RACE_GROUP, slots=slots)
    return text


def validate(text: str, source: str) -> Desired:
    """``parse_desired`` on the starter; raises InitError with its diagnostics."""
    try:
        return parse_desired(text, source, {})
    except InvalidDesiredState as e:
        raise InitError(f"the answers do not make a valid file:\n{e}") from None


def write_new(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``path`` (0644, like a file you made yourself); refuses to replace one unless
    ``force``."""
    try:
        if force:
            atomic_write(path, text, mode=0o644)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise InitError(f"{path} exists; --force replaces it") from None
    except OSError as e:
        raise InitError(f"cannot write {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
