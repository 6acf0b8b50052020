"""gcloud argument lists for each Cloud call (private to ``gcloud``).

Purpose: build the argv tail of every command from validated values. Pure: every name is
checked with ``model.names`` (or the label / query-path rules here) before it is placed in an
argument, and every value rides in the same element as its flag (``--zone=Z``), so nothing can
be read as an option. May not: run anything, or add ``--project`` / ``--format`` (the adapter
appends the flags common to every call).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal

from reconciler.errors import UnsafeName
from reconciler.model import names
from reconciler.model.boot_script import GUEST_KEY, GUEST_VALUE, STARTUP_KEY
from reconciler.model.requests import CreateRequest, max_run, window
from reconciler.model.times import utc_text

QR: Final = ("compute", "tpus", "queued-resources")
_FILE_RE: Final = re.compile(r"/[A-Za-z0-9_./-]{1,4000}")
VM: Final = ("compute", "tpus", "tpu-vm")
ALL_ZONES: Final = "-"

# Label keys and values as GCP accepts them, ASCII only; keys start with a letter.
# "", "namespace/" or "namespace/key".
_MODE_FLAGS: Final[Mapping[str, tuple[str, ...]]] = {
    "spot": ("--spot",),
    "reserved": ("--reserved",),
    "on-demand": (),
    "flex-start": ("--provisioning-model=flex-start",),  # with `gcloud alpha` (v2alpha1)
}


def labels_arg(labels: Mapping[str, str]) -> str:
    """``k=v,k2=v2`` for ``--labels=``; raises UnsafeName on a key or value GCP would refuse."""
    names.check_labels(labels)
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def list_args(
    kind: Literal["queued-resources", "tpu-vm"], zone: str, *, alpha: bool = False
) -> list[str]:
    """List every QR or node of one zone, or of all zones with ``zone="-"``; ``alpha``: QRs
    through ``gcloud alpha`` (v2alpha1: a flex-start run's ``terminationTime``)."""
    if zone != ALL_ZONES:
        names.check_zone(zone)
    head = ("alpha",) if alpha and kind == "queued-resources" else ()
    return [*head, *(QR if kind == "queued-resources" else VM), "list", f"--zone={zone}"]


def window_args(request: CreateRequest) -> list[str]:
    """The queueing window as gcloud's flags. gcloud itself folds a start and an end into the
    API's ``validInterval`` (relative ones against its own clock), so the flags need no clock:
    a start time with an end is two times, a start duration with an end two durations (the
    end, as in the REST body, ``valid_until`` after the start)."""
    after, at, until = window(request)
    if at is not None:
        start = [f"--valid-after-time={utc_text(at)}"]
        return start + ([f"--valid-until-time={utc_text(at + until)}"] if until else [])
    if after is not None:
        start = [f"--valid-after-duration={after}s"]
        return start + ([f"--valid-until-duration={after + until}s"] if until else [])
    return [f"--valid-until-duration={until}s"] if until else []


def _node_args(name: str, count: int) -> list[str]:
    """One node named like the QR, or a multislice of ``count`` nodes ``<name>-0`` ...."""
    if count <= 1:
        return [f"--node-id={name}"]
    return [f"--node-count={int(count)}", f"--node-prefix={name}"]


def boot_args(startup_file: str | None) -> list[str]:
    """``setup.at_boot``: the startup script from a file (its text never in argv: it may be
    large) and guest attributes on; the path is one gcloud's ``KEY=FILE`` list can carry."""
    if startup_file is None:
        return []
    if not _FILE_RE.fullmatch(startup_file):
        raise UnsafeName(f"invalid startup script path {startup_file!r}")
    return [
        f"--metadata-from-file={STARTUP_KEY}={startup_file}",
        f"--metadata={GUEST_KEY}={GUEST_VALUE}",
    ]


def create_args(request: CreateRequest, startup_file: str | None = None) -> list[str]:
    """One queued resource with one node of the same name (or a multislice's), issued
    ``--async`` (no waiting on operations); ``startup_file`` holds ``request.startup_script``
    (the caller writes it)."""
    name = names.check_name(request.name)
    if request.mode not in _MODE_FLAGS:
        raise UnsafeName(
            f"invalid mode {request.mode!r}: expected spot, on-demand, reserved or flex-start"
        )
    args = [
        *(("alpha",) if request.mode == "flex-start" else ()),
        *QR,
        "create",
        name,
        f"--zone={names.check_zone(request.zone)}",
        *_node_args(name, request.slices),
        f"--accelerator-type={names.check_accelerator(request.accelerator)}",
        f"--runtime-version={names.check_runtime_version(request.image)}",
        *_MODE_FLAGS[request.mode],
    ]
    if request.mode == "flex-start":
        args.append(f"--max-run-duration={max_run(request)}s")
    if request.network is not None:
        args.append(f"--network={names.check_network(request.network)}")
    if request.subnetwork is not None:
        args.append(f"--subnetwork={names.check_network(request.subnetwork)}")
    if request.internal_ips:
        args.append("--internal-ips")
    args.extend(window_args(request))
    if request.labels:
        args.append(f"--labels={labels_arg(request.labels)}")
    args.extend(boot_args(startup_file))
    args.append("--async")
    return args


def delete_args(zone: str, name: str, *, force: bool) -> list[str]:
    args = [*QR, "delete", names.check_name(name), f"--zone={names.check_zone(zone)}"]
    if force:
        args.append("--force")
    args.append("--async")
    return args


def describe_args(zone: str, name: str) -> list[str]:
    return [*QR, "describe", names.check_name(name), f"--zone={names.check_zone(zone)}"]


def guest_attributes_args(zone: str, node: str, query_path: str | None) -> list[str]:
    args = [*VM, "get-guest-attributes", names.check_name(node), f"--zone={names.check_zone(zone)}"]
    if query_path:
        args.append(f"--query-path={names.check_query_path(query_path)}")
    return args
