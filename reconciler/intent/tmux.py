"""Closing a slot's tmux window: the one direct action of the intent surfaces (MCP, CLI).

May: read desired.yaml for ``settings.tmux_socket``, look for the tmux server's socket file,
drive ``adapters.tmux.TmuxMirror``. May not: edit desired.yaml or touch anything but the
windows named after the slot.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from reconciler.errors import ReconcilerError, SetupFailed, StatusUnreadable

if TYPE_CHECKING:  # the edit engine loads only where an edit is made
    from reconciler.intent.engine import IntentEditor

SOCKET_ENV: Final = "TPU_RECONCILER_TMUX_SOCKET"
REOPEN_NOTE: Final = (
    "an ACTIVE slot with tmux on gets its window again at the controller's next pass "
    "(set its setup tmux to false to prevent that)"
)


def tmux_socket(store: IntentEditor) -> str | None:
    """``$TPU_RECONCILER_TMUX_SOCKET``, else ``settings.tmux_socket``, else tmux's default."""
    socket = os.environ.get(SOCKET_ENV)
    if socket:
        return socket
    try:
        return store.parse(store.read().decode("utf-8", "replace")).settings.tmux_socket
    except ReconcilerError:
        return None


async def close_window(store: IntentEditor, name: str) -> list[str]:
    """Close every ``tpu-*`` window named ``name``; the targets closed (maybe none)."""
    try:
        from reconciler.adapters.tmux import TmuxMirror
    except ImportError as e:  # the tmux adapter or libtmux missing from this install
        raise SetupFailed(f"tmux support is not available: {e}") from None
    async with TmuxMirror(tmux_socket(store)) as mirror:
        closed = await mirror.close(name)
    return [w.target for w in closed]


def _no_server(socket: str | None) -> bool:
    """Whether no tmux server listens on ``socket`` (``tmux -L``; None: tmux's default): its
    socket file, in ``$TMUX_TMPDIR`` (else /tmp) under ``tmux-<uid>``, does not exist."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return not os.path.exists(os.path.join(base, f"tmux-{os.getuid()}", socket or "default"))


def tmux_may_run(store: IntentEditor) -> bool:
    """Whether a tmux server may hold windows of the desired file's slots (its socket file is
    there): without one, ``stays_open_notes`` has nothing to say."""
    return not _no_server(tmux_socket(store))


async def stays_open_notes(store: IntentEditor, name: str) -> list[str]:
    """Warnings that releasing ``name`` leaves its tmux windows open (design: deleting a TPU
    leaves its window and warns). Asks the tmux server, if one runs (without one, tmux would
    answer "no windows" after libtmux's import and a run of tmux); the controller's last
    snapshot answers when tmux cannot."""
    targets: list[str] = []
    socket = tmux_socket(store)
    if _no_server(socket):
        return []
    try:
        from reconciler.adapters.tmux import TmuxMirror

        async with TmuxMirror(socket) as mirror:
            targets = [w.target for w in await mirror.windows_for(name)]
    except (ImportError, ReconcilerError):
        from reconciler.adapters.status_file import read_status  # the status model: only here

        try:
            snapshot = read_status(store.state.status)
        except StatusUnreadable:
            snapshot = None
        windows = snapshot.tmux.windows if snapshot else ()
        targets = [t for t in windows if isinstance(t, str) and t.rsplit(":", 1)[-1] == name]
    return [
        f"tmux window {target} stays open (close it with tmux_close / "
        f"`tpu-reconciler tmux close {name}`)"
        for target in targets
    ]
