"""The tmux SSH mirror: one window per ACTIVE slot, running ``ssh -A`` to worker 0.

The rules (design.md §1) this module keeps exactly:

- a window is named after its slot and lives in the per-zone session ``tpu-<zone code>``;
- ``sync`` only *creates*: it never kills a window — not when a slot leaves ACTIVE, not for a
  duplicate, not on exit (``aclose`` leaves the server alone);
- ``remain-on-exit on`` is set globally *before* any window is created, so a window whose ssh
  exits at once stays visible with its exit status; a server this module starts gets the
  option in the same tmux invocation that creates its first window;
- a window in a ``tpu-*`` session whose slot is not ACTIVE is reported as orphaned, never closed;
- ``close`` is the one way to close a window, and callers must have confirmation first.

May: run tmux (through libtmux, argument lists only) on one server chosen by socket name.
May not: decide which slots deserve a window (the controller passes ``WantedWindow`` values),
print, or let a libtmux exception escape (they become ``SetupFailed`` or an inventory note).

libtmux 0.62 is synchronous, forks a tmux process per call and is not thread-safe, so every
call runs on one dedicated worker thread behind the async methods; the event loop never blocks.
Window commands are run by tmux through ``/bin/sh -c``: every argv element is validated and the
command is built with ``shlex.join``, so nothing in it is interpreted by that shell.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, TypeVar

import libtmux
from libtmux import exc as tmux_exc

from reconciler.adapters.openssh import UNSAFE_CHARS as _UNSAFE_CHARS
from reconciler.adapters.openssh import check_text as _check_text
from reconciler.adapters.openssh import ssh_argv as ssh_argv  # re-exported
from reconciler.errors import SetupFailed, UnsafeName
from reconciler.model import names

SESSION_PREFIX: Final = "tpu-"
SESSION_RE: Final = re.compile(r"^tpu-[a-z0-9]{1,16}$")
#: tmux ``-L`` socket names: no path separators, never read as an option.
SOCKET_RE: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_ENV_KEY_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_RETRY_DELAY: Final = 60.0

T = TypeVar("T")


def session_name(zone_code: str) -> str:
    """The per-zone session: ``usc2b`` -> ``tpu-usc2b``."""
    return SESSION_PREFIX + names.check_zone_code(zone_code)


@dataclass(frozen=True, slots=True)
class WantedWindow:
    """A window the controller wants to exist: ``session:window`` running ``argv``.

    Validated on construction (UnsafeName): ``session`` is ``tpu-<zone code>``, ``window`` a
    slot name, ``argv`` non-empty text without control characters whose first element is not an
    option, ``environment`` keys are variable names (values are set with ``new-window -e``).
    """

    session: str
    window: str
    argv: tuple[str, ...]
    environment: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.session, str) or not SESSION_RE.fullmatch(self.session):
            raise UnsafeName(f"invalid tmux session {self.session!r}: expected tpu-<zone code>")
        names.check_name(self.window)
        argv = tuple(self.argv)
        if not argv or argv[0].startswith("-"):
            raise UnsafeName(f"invalid window command {argv!r}")
        for arg in argv:
            _check_text("command argument", arg)
        env = dict(self.environment)
        for key, value in env.items():
            if not isinstance(key, str) or not _ENV_KEY_RE.fullmatch(key):
                raise UnsafeName(f"invalid environment variable name {key!r}")
            if not isinstance(value, str) or _UNSAFE_CHARS.search(value):
                raise UnsafeName(f"invalid value for environment variable {key}")
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "environment", MappingProxyType(env))

    @property
    def target(self) -> str:
        return f"{self.session}:{self.window}"

    @property
    def command(self) -> str:
        """The shell command tmux runs: each argv element quoted, nothing interpreted."""
        return shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class TmuxWindow:
    """One window in a ``tpu-*`` session. ``dead``: its command exited (remain-on-exit)."""

    session: str
    window: str
    window_id: str
    dead: bool = False

    @property
    def target(self) -> str:
        return f"{self.session}:{self.window}"


@dataclass(frozen=True, slots=True)
class SyncReport:
    """Targets (``session:window``) created by this sync, and wanted ones that already existed."""

    created: tuple[str, ...] = ()
    existing: tuple[str, ...] = ()
    respawned: tuple[str, ...] = ()  # dead windows of an older node, restarted for this one


@dataclass(frozen=True, slots=True)
class TmuxInventory:
    """Every window in ``tpu-*`` sessions, and the orphaned ones among them.

    ``orphans`` is empty when the ACTIVE slots were not known (``known`` False): then every
    window's standing is unknown. ``note`` explains an empty or partial answer (no tmux, no
    server, a tmux error); it is None when the listing is complete.
    """

    windows: tuple[TmuxWindow, ...] = ()
    orphans: tuple[TmuxWindow, ...] = ()
    known: bool = True
    note: str | None = None

    def targets(self) -> tuple[list[str], list[str]]:
        """The ``session:window`` targets of every window and of the orphans (what the status
        snapshot's ``tmux`` section lists, through ``core/status``)."""
        return [w.target for w in self.windows], [w.target for w in self.orphans]


class TmuxMirror:
    """Async front of one tmux server, driven from a single worker thread.

    ``socket_name`` selects the server (``tmux -L``; None is tmux's default server).
    ``config_file`` is passed as ``tmux -f`` when this mirror starts the server (tests use
    ``/dev/null``); ``tmux_bin`` overrides the tmux executable. Use ``async with`` or call
    ``aclose`` — which stops the worker thread and never touches the tmux server.
    """

    def __init__(
        self,
        socket_name: str | None = None,
        *,
        config_file: str | None = None,
        tmux_bin: str | None = None,
    ) -> None:
        if socket_name is not None and not SOCKET_RE.fullmatch(socket_name):
            raise UnsafeName(f"invalid tmux socket name {socket_name!r}")
        self.socket_name = socket_name
        self._server = libtmux.Server(
            socket_name=socket_name, config_file=config_file, tmux_bin=tmux_bin
        )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tmux")
        self._closed = False

    @property
    def socket_label(self) -> str:
        return f"socket {self.socket_name!r}" if self.socket_name else "the default socket"

    async def __aenter__(self) -> TmuxMirror:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise SetupFailed("tmux mirror is closed", delay=_RETRY_DELAY)
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def aclose(self) -> None:
        """Stop the worker thread (after the call in flight). Windows and server stay."""
        if not self._closed:
            self._closed = True
            await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)

    async def sync(self, wanted: Sequence[WantedWindow]) -> SyncReport:
        """Create each wanted window that does not exist yet; kill nothing.

        A window "exists" when its session has any window of that name (a dead one, or several,
        count). Raises SetupFailed (temporary) when tmux is missing or fails.
        """
        return await self._run(lambda: self._translate(lambda: self._sync(wanted)))

    async def inventory(self, active_slots: Collection[str] | None) -> TmuxInventory:
        """Windows in ``tpu-*`` sessions; orphans are those whose slot is not in
        ``active_slots`` (None: not known, no orphans judged). Never raises for a missing tmux
        or server: the inventory is empty and ``note`` says why."""
        return await self._run(lambda: self._inventory(active_slots))

    async def windows_for(self, slot: str) -> tuple[TmuxWindow, ...]:
        """Every window named ``slot`` in ``tpu-*`` sessions (what ``close`` would close)."""
        names.check_name(slot)
        return await self._run(lambda: self._translate(lambda: self._find(slot)))

    async def close(self, slot: str) -> tuple[TmuxWindow, ...]:
        """Kill every window named ``slot`` in ``tpu-*`` sessions; return those closed.

        The only way this package closes a window: callers confirm with the user first.
        """
        names.check_name(slot)
        return await self._run(lambda: self._translate(lambda: self._close(slot)))

    # --- worker-thread side: everything below runs on the single tmux thread ---------------

    def _translate(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except tmux_exc.TmuxCommandNotFound:
            raise SetupFailed("tmux is not installed (apt-get install tmux)") from None
        except (tmux_exc.LibTmuxException, OSError) as e:
            raise SetupFailed(
                f"tmux on {self.socket_label}: {e or type(e).__name__}", delay=_RETRY_DELAY
            ) from None

    def _listing(self) -> list[TmuxWindow]:
        return [
            TmuxWindow(
                session=str(w.session_name),
                window=str(w.window_name),
                window_id=str(w.window_id),
                dead=w.pane_dead == "1",
            )
            for w in self._server.windows
            if str(w.session_name or "").startswith(SESSION_PREFIX)
        ]

    def _find(self, slot: str) -> tuple[TmuxWindow, ...]:
        return tuple(w for w in self._listing() if w.window == slot)

    def _sync(self, wanted: Sequence[WantedWindow]) -> SyncReport:
        unique = list({w.target: w for w in wanted}.values())
        if not unique:
            return SyncReport()
        alive = self._server.is_alive()
        present = {w.target for w in self._listing()} if alive else set()
        missing = [w for w in unique if w.target not in present]
        existing = tuple(w.target for w in unique if w.target in present)
        respawned = tuple(w.target for w in unique if w.target in present and self._respawn(w))
        created: list[str] = []
        if missing and not alive:
            first = missing.pop(0)
            self._start_server_with(first)
            created.append(first.target)
        elif missing:
            self._server.set_option("remain-on-exit", "on", global_=True)
        for w in missing:
            self._create(w)
            created.append(w.target)
        return SyncReport(created=tuple(created), existing=existing, respawned=respawned)

    def _respawn(self, w: WantedWindow) -> bool:
        """Restart a window whose every pane is dead *and* was started for another command
        (an earlier node instance: another address or host-key alias). A window the user
        exited on the current node stays as it is, and tmux itself refuses to respawn a live
        pane, so this never ends a running session."""
        mine = [t for t in self._listing() if t.target == w.target]
        if not mine or not all(t.dead for t in mine):
            return False
        proc = self._server.cmd(
            "display-message", "-p", "-t", mine[0].window_id, "#{pane_start_command}"
        )
        started = (proc.stdout or [""])[0].strip()
        if started.startswith('"') and started.endswith('"'):
            started = started[1:-1]
        if started == w.command:
            return False
        env_flags = [f"-e{k}={v}" for k, v in w.environment.items()]
        result = self._server.cmd("respawn-pane", "-t", mine[0].window_id, *env_flags, w.command)
        return result.returncode == 0

    def _start_server_with(self, w: WantedWindow) -> None:
        """Start the server, set remain-on-exit and create the first window in one tmux run,
        so not even the first window can close before the option is on."""
        env_flags = [f"-e{k}={v}" for k, v in w.environment.items()]
        chain = (
            ("start-server", ";"),
            ("set-option", "-g", "remain-on-exit", "on", ";"),
            ("new-session", "-d", f"-s{w.session}", "-n", w.window, *env_flags, w.command),
        )
        proc = self._server.cmd(*(arg for part in chain for arg in part))
        if proc.returncode != 0 or not self._server.is_alive():
            detail = " ".join(proc.stderr) or f"exit status {proc.returncode}"
            raise SetupFailed(
                f"could not start tmux on {self.socket_label}: {detail}", delay=_RETRY_DELAY
            )

    def _create(self, w: WantedWindow) -> None:
        env = dict(w.environment) or None
        session = self._server.sessions.get(session_name=w.session, default=None)
        if session is None:
            self._server.new_session(
                session_name=w.session,
                window_name=w.window,
                window_command=w.command,
                environment=env,
                attach=False,
            )
        else:
            session.new_window(
                window_name=w.window, window_shell=w.command, environment=env, attach=False
            )

    def _inventory(self, active_slots: Collection[str] | None) -> TmuxInventory:
        known = active_slots is not None
        try:
            if not self._server.is_alive():
                self._server.cmd("-V")  # tells "not installed" from "not running"
                return TmuxInventory(known=known, note=f"no tmux server on {self.socket_label}")
            windows = tuple(self._listing())
        except tmux_exc.TmuxCommandNotFound:
            return TmuxInventory(known=known, note="tmux is not installed")
        except (tmux_exc.LibTmuxException, OSError) as e:
            return TmuxInventory(known=known, note=f"tmux on {self.socket_label}: {e}")
        active = frozenset(active_slots or ())
        orphans = tuple(w for w in windows if w.window not in active) if known else ()
        return TmuxInventory(windows=windows, orphans=orphans, known=known)

    def _close(self, slot: str) -> tuple[TmuxWindow, ...]:
        closed = []
        for w in self._find(slot):
            window = self._server.windows.get(window_id=w.window_id, default=None)
            if window is not None:
                window.kill()
                closed.append(w)
        return tuple(closed)
