"""``tpu-reconciler quota``: chip limits, their use and what waits on each, from the
controller's snapshot (the desired file alone when there is none)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.exitcodes import EX_OK

if TYPE_CHECKING:
    import argparse


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "quota",
        help="chip limits, their use, and the slots waiting on each",
        description="Each chip limit (the file's quotas:, and the cloud's with "
        "settings.quota_source: cloud) with the chips counted under it and the slots whose "
        "create waits on it; then the creates the cloud refused for quota, in its words.",
    )
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(handler=f"{__name__}:quota_cmd")


def quota_cmd(args: argparse.Namespace) -> int:
    from reconciler.intent.quota_views import quota_text
    from reconciler.surfaces.cli._snapshot import current_status

    print(quota_text(current_status(args), as_json=args.json), end="")
    return EX_OK
