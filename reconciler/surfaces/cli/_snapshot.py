"""The snapshot ``status``, ``status --watch``, ``quota`` and ``timeline`` show, for the CLI's
arguments (``--file``, ``--state-dir``, ``--owner``): ``intent/status_view`` reads it.

May: call ``intent.status_view``. May not: write, print, call the cloud.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.intent import status_view

if TYPE_CHECKING:
    import argparse

    from reconciler.model.status import StatusSnapshot


def current_status(args: argparse.Namespace) -> StatusSnapshot:
    """The snapshot with ``controller`` filled in from the lock; a desired-only one (with a
    ``note``) when the controller never ran or its snapshot cannot be read."""
    return status_view.current_status(args.file, args.state_dir, getattr(args, "owner", None))


def for_owner(args: argparse.Namespace, snapshot: StatusSnapshot) -> StatusSnapshot:
    """Only ``--owner``'s slots when it is given."""
    return status_view.for_owner(getattr(args, "owner", None), snapshot)
