"""The TUI application: a live view of the controller's snapshot, one key per intent edit.

Layout, top to bottom: the header line (file valid, controller running, backend, observation
age), a banner when no controller runs or the file is invalid (with the command to start it,
or the ``file:line:col`` errors), the slot table, the race-group strip, one bottom pane (plan,
events, logs, info, history, chips: every worker's chips with ``setup.telemetry``, or the
lab's timeline: ``_timeline``), the
result line of the last key, Textual's key footer.

Data: ``_frame.load_frame`` reads the snapshot, the file and the lock; a worker watches
``status.json``, ``events.jsonl`` and desired.yaml (one inotify watcher on their directories; no
polling) and reloads on a change. A 1 s timer redraws the ages and re-probes the controller
lock (a local flock, not the cloud). Keys map to edits in ``_keys``; edits run on a thread
worker through ``IntentEditor.apply`` (source ``tui``), so the UI never waits on the file lock
(``_key_actions``: the result line, each edit key's action, proposing, arming, applying, and
the local keys). The bottom pane is switched and filled on workers by ``_panes``.

May: read the state directory (the capacity history too, for the history pane) and
desired.yaml, apply intent edits, store the Tailscale key in the secret store, close a slot's
tmux window (``intent.tmux``), copy to the clipboard, read workload logs through its injected
log source (``_logs``: SSH, read only).
May not: construct a cloud client or call the cloud API, run anything on a TPU, print.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import ContentSwitcher, Footer, Input, RichLog, Static

from reconciler.intent.status_view import StateDir, lock_holder
from reconciler.surfaces.tui import _keys
from reconciler.surfaces.tui._frame import (
    Frame,
    Holder,
    Parsed,
    SlotRow,
    event_lines,
    load_frame,
    parse_file,
    tilde,
)
from reconciler.surfaces.tui._key_actions import KeyActions
from reconciler.surfaces.tui._logs import LogSource
from reconciler.surfaces.tui._panes import PaneViews
from reconciler.surfaces.tui._timeline import KEY as TIMELINE_KEY
from reconciler.surfaces.tui._timeline import MOVES as TIMELINE_MOVES
from reconciler.surfaces.tui._timeline import TimelineKeys, TimelinePane
from reconciler.surfaces.tui._widgets import HelpScreen, SlotTable

if TYPE_CHECKING:
    from reconciler.intent.engine import IntentEditor

PANES: Final = ("plan", "events", "logs", "info", "history")
TABLE_EVERY: Final = 30  # seconds between redraws of all the ages in the table
NAVIGATION: Final = (
    ("j k ↓ ↑", "next / previous slot"),
    ("g G", "first / last slot (also home / end)"),
    ("pgdn pgup", "a page down / up"),
    ("→ ←", "scroll the table sideways (a narrow one leaves columns out: i shows all)"),
    ("/", "filter the slots, owner:NAME for one person's (escape clears)"),
    TIMELINE_MOVES,
)
#: The use case each key runs, by its canonical name (``intent.usecases``): the help names it
#: after the key's words, as the CLI verb and the MCP tool are named.
KEY_ACTIONS: Final = {
    "c": "hold",
    "a": "queue_slots",
    "B": "race",
    "d": "release",
    "x": "tmux_close",
    "o": "tmux_open",
    "S": "setup",
    "T": "setup",
    "w": "workload_restart",
    "i": "info",
    "l": "logs",
    "p": "last_plan",
    "e": "events",
    "h": "history",
    TIMELINE_KEY[0]: "timeline",
}
_KEYS: Final = (
    ("c", "hold the slot (want: held)"),
    ("a", "hold every slot not queued (race candidates are left to their group)"),
    ("b", "put the slot in the bucket, or take it out"),
    ("B", f"race the bucket: {_keys.BUCKET_GROUP}, 1 winner, 1 accelerator type (asks first)"),
    ("d", "release the slot (twice; a running TPU also asks y/n)"),
    ("x", "close the slot's tmux window (twice)"),
    ("o", "open a tmux window for the slot (setup tmux: true)"),
    ("s", "copy the SSH command (OSC 52, then wl-copy / xclip)"),
    ("S", "run setup again (setup generation + 1)"),
    ("t", "save the Tailscale auth key (masked; into the secret store)"),
    ("T", "turn Tailscale on for the slot"),
    ("w", "restart the slot's workload (twice; a slot without one says so)"),
    ("i", "info pane: IPs per worker, create time, last error, SSH"),
    ("l", "logs pane: every worker of the slot's workload, following"),
    ("p", "plan pane: the controller's next actions"),
    ("e", "events pane: the event log's tail"),
    ("h", "history pane: waits by zone, chips held, preemptions per day"),
    ("u", "chips pane: each worker's chips, duty cycle, HBM and holders (setup.telemetry)"),
    TIMELINE_KEY,
    ("r", "reload now"),
    ("?", "this help"),
    ("q", "quit"),
)
KEYS: Final = tuple(
    (key, f"{text} · {KEY_ACTIONS[key]}" if key in KEY_ACTIONS else text) for key, text in _KEYS
)
HELP: Final = (("Move", NAVIGATION), ("Act", KEYS))

CSS: Final = """
Screen { layout: vertical; }
#header { height: 1; background: $primary; color: $text; padding: 0 1; }
#banner { height: auto; max-height: 8; background: $warning 30%; padding: 0 1; display: none; }
#banner.shown { display: block; }
#slots { height: 1fr; min-height: 4; }
#races { height: auto; max-height: 3; padding: 0 1; color: $text-muted; }
#pane { height: 35%; min-height: 4; border-top: solid $primary; }
#pane.tall { height: 70%; }
#pane > * { height: 1fr; padding: 0 1; }
#filter { display: none; height: 1; border: none; padding: 0 1; }
#filter.shown { display: block; }
#result { height: auto; max-height: 5; padding: 0 1; background: $boost; }
#result.error { color: $error; }
ModalScreen { align: center middle; }
#dialog { width: 72; max-width: 95%; height: auto; max-height: 90%; border: round $primary;
          background: $surface; padding: 0 1; }
#help-keys { height: auto; max-height: 70vh; }
.title { text-style: bold; }
.hint { color: $text-muted; }
"""


class TpuApp(TimelineKeys, KeyActions, PaneViews):
    """``tpu-reconciler tui``. ``clock`` and ``holder`` (the controller probe) are arguments
    so a screen can be reproduced; ``watch=False`` leaves out the file watcher and the timer
    (snapshot tests drive ``reload`` themselves)."""

    CSS = CSS
    TITLE = "tpu-reconciler"
    ENABLE_COMMAND_PALETTE = False  # every action has its key (?); saves start-up work
    # The footer shows those with ``show`` in this order; they fit 80 columns (? lists all).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit_app", "quit"),
        Binding("c", "hold", "hold"),
        Binding("a", "hold_all", "hold all", show=False),
        Binding("b", "bucket", "bucket", show=False),
        Binding("B", "race_bucket", "race", key_display="B", show=False),
        Binding("d", "release", "release"),
        Binding("x", "close_tmux", "close tmux", show=False),
        Binding("o", "open_tmux", "tmux", show=False),
        Binding("s", "copy_ssh", "ssh"),
        Binding("S", "rerun_setup", "setup", show=False, key_display="S"),
        Binding("t", "tailscale_key", "ts key", show=False),
        Binding("T", "tailscale_on", "tailscale", show=False, key_display="T"),
        Binding("w", "restart_workload", "restart", show=False),
        Binding("i", "pane('info')", "info"),
        Binding("l", "pane('logs')", "logs"),
        Binding("p", "pane('plan')", "plan"),
        Binding("e", "pane('events')", "events"),
        Binding("h", "pane('history')", "history", show=False),
        Binding("u", "pane('chips')", "chips", show=False),
        Binding(TIMELINE_KEY[0], "pane('timeline')", "timeline", show=False),
        Binding("slash", "filter", "filter", key_display="/", show=False),
        Binding("r", "reload", "reload", show=False),
        Binding("escape", "clear_filter", show=False),
    ]

    def __init__(
        self,
        file: Path,
        state: StateDir,
        *,
        editor: IntentEditor | None = None,
        start_command: str = "tpu-reconciler run",
        clock: Callable[[], float] = time.time,
        holder: Holder = lock_holder,
        log_source: LogSource | None = None,
        watch: bool = True,
        theme: str = "textual-dark",
        env: dict[str, str] | None = None,
        owner: str | None = None,
    ) -> None:
        super().__init__()
        self.file = file
        self.path = file.expanduser().resolve()
        self.state = state
        self._editor = editor
        self.start_command = start_command
        self.clock = clock
        self.holder = holder
        self.log_source = log_source
        self.watching = watch
        self.env = env
        self.theme = theme
        self.frame: Frame | None = None
        self.bucket: tuple[str, ...] = ()
        self.filter_text = f"owner:{owner}" if owner else ""
        self.pane = "plan"
        self._armed: tuple[str, str | None, float, Any] | None = None
        self._stop = asyncio.Event()
        self._logs_for: tuple[str | None, str | None, tuple[str, ...]] | None = None
        self._info_for: tuple[str | None, float, str] | None = None
        self._history_for: tuple[int, int] | None = None
        self._shown_header = ""
        self._parsed: Parsed | None = None
        self._events: tuple[str, ...] | None = None
        self._shown_races = ""
        self.edits_done = 0  # applied edits (tests and benchmarks wait on it)

    @property
    def editor(self) -> IntentEditor:
        """The intent engine, loaded on first use (off the first frame's path)."""
        if self._editor is None:
            from reconciler.intent.engine import IntentEditor

            self._editor = IntentEditor(self.file, self.state)
        return self._editor

    def full_frame(self, changed: Collection[str] | None = None) -> Frame:
        """A frame with the file parsed and the events' tail (runs on a thread). ``changed``:
        the names of the files that changed (None: all); the others' last reading is kept."""
        editor = self.editor
        if changed is None or self.path.name in changed or self._parsed is None:
            self._parsed = parse_file(editor)
        if changed is None or self.state.events.name in changed or self._events is None:
            self._events = event_lines(editor)
        return load_frame(
            self.file,
            self.state,
            now=self.clock(),
            holder=self.holder,
            parsed=self._parsed,
            events=self._events,
        )

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="banner")
        yield SlotTable(id="slots")
        yield Static(id="races")
        with ContentSwitcher(initial="plan", id="pane"):
            yield Static(id="plan")
            yield RichLog(id="events", max_lines=500, wrap=False, auto_scroll=True)
            yield RichLog(id="logs", max_lines=5000, wrap=False, auto_scroll=True)
            yield Static(id="info")
            yield RichLog(id="history", max_lines=500, wrap=False, auto_scroll=False)
            yield Static(id="chips")
            yield TimelinePane(self._read_timeline, self._colour, id="timeline")
        yield Input(
            value=self.filter_text,
            placeholder="filter: part of a slot, zone, accelerator or state; owner:NAME",
            id="filter",
            classes="shown" if self.filter_text else "",
        )
        yield Static("? for help", id="result", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(SlotTable)
        table.set_colours(self._colour)
        table.focus()
        # The first frame from the snapshot alone; once it is on screen the file is parsed,
        # off the UI thread.
        self.show(load_frame(self.file, self.state, now=self.clock(), holder=self.holder))
        self.call_after_refresh(self._load_in_thread)
        if self.watching:
            self.set_interval(1.0, self._tick)
            self._watch()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one(SlotTable).relayout(event.size.width)
        if self.pane == "history":
            self.call_after_refresh(self._pane_follow)

    def _colour(self, name: str) -> str:
        if not name:
            return ""
        value = getattr(self.current_theme, name, None)
        return str(value) if value else ""

    # -- data ------------------------------------------------------------------------------
    def reload(self) -> None:
        """Read everything again and redraw (on the UI thread; ``r`` and the first frame)."""
        self.show(self.full_frame())

    def show(self, frame: Frame) -> None:
        old, self.frame = self.frame, frame
        self._header(frame)
        banner = self.query_one("#banner", Static)
        text = frame.banner(self.start_command)
        if old is None or text != old.banner(self.start_command):
            banner.update(tilde(text or ""))
            banner.set_class(text is not None, "shown")
        self._table(frame)
        races = self._races(frame)
        if races != self._shown_races:
            self._shown_races = races
            self.query_one("#races", Static).update(races)
        if old is None or frame.plan != old.plan:
            self.query_one("#plan", Static).update("\n".join(frame.plan))
        if old is None or frame.events != old.events:
            events = self.query_one("#events", RichLog)
            events.clear()
            events.write("\n".join(frame.events) if frame.events else "no events yet")
        self._pane_follow()

    def _header(self, frame: Frame) -> None:
        text = frame.header()
        if text != self._shown_header:
            self._shown_header = text
            self.query_one("#header", Static).update(text)

    def _table(self, frame: Frame) -> None:
        needle = self.filter_text.lower()
        rows = [s for s in frame.slots if not needle or _matches(s, needle)]
        self.query_one(SlotTable).show(rows, frame.now, self.bucket)

    def _races(self, frame: Frame) -> str:
        parts = [g.text() for g in frame.races]
        if self.bucket:
            parts.append(f"bucket: {', '.join(self.bucket)} (B races them)")
        return "  |  ".join(parts) if parts else "no race groups"

    @work(exclusive=True, group="load", thread=True)
    def _load_in_thread(self) -> None:
        self.call_from_thread(self.show, self.full_frame())

    @work(exclusive=True, group="watch")
    async def _watch(self) -> None:
        """Reload when status.json, events.jsonl or desired.yaml change: one inotify watcher
        on their two directories (editors and the controller save by rename, so files are
        not watched themselves), woken only by those names; a vanished directory is waited
        for. No timer: an idle TUI does not wake for this."""
        from watchfiles import awatch

        state = self.state
        wanted = {state.status.name, state.events.name, self.path.name}
        dirs = {state.status.parent, state.events.parent, self.path.parent}

        def relevant(change: object, path: str) -> bool:
            return Path(path).name in wanted

        while not self._stop.is_set():
            try:
                async for changes in awatch(
                    *sorted(dirs),
                    watch_filter=relevant,
                    debounce=1000,
                    step=20,  # ms; also how often the watcher thread checks for stop
                    stop_event=self._stop,
                    rust_timeout=60_000,
                    recursive=False,
                    ignore_permission_denied=True,
                ):
                    names = {Path(path).name for _, path in changes}
                    self.show(await asyncio.to_thread(self.full_frame, names))
            except (OSError, RuntimeError):  # a directory missing or replaced: look again
                pass
            if not self._stop.is_set():
                await asyncio.sleep(1.0)
                with contextlib.suppress(Exception):
                    self.show(await asyncio.to_thread(self.full_frame))

    def _tick(self) -> None:
        """Ages move and a controller may have stopped: the header every second, and the
        table's "for" cells: young ones (shown to the second) every second, all of them
        every ``TABLE_EVERY`` seconds (older ages are shown to the minute or hour)."""
        from dataclasses import replace

        frame = self.frame
        if frame is None:
            return
        pid = self.holder(self.state)
        now = self.clock()
        if pid != frame.controller_pid:
            self.show(replace(frame, now=now, controller_pid=pid))
            return
        self.frame = replace(frame, now=now)
        self._header(self.frame)
        if int(now) // TABLE_EVERY != int(frame.now) // TABLE_EVERY:
            rows = frame.slots
        else:  # ages under 10 minutes are shown to the second
            rows = tuple(s for s in frame.slots if s.since is not None and now - s.since < 610)
        if rows:
            self.query_one(SlotTable).ages(rows, now)

    # -- the selection ---------------------------------------------------------------------
    @property
    def selected(self) -> SlotRow | None:
        if self.frame is None:
            return None
        return self.frame.slot(self.query_one(SlotTable).selected)

    def on_slot_table_highlighted(self, event: SlotTable.Highlighted) -> None:
        self._pane_follow()

    # -- filter, reload, help, quit --------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value
            if self.frame is not None:
                self.show(self.frame)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.query_one(SlotTable).focus()
            if not event.value:
                event.input.remove_class("shown")

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.filter_text = ""
        self.query_one(SlotTable).focus()
        if self.frame is not None:
            self.show(self.frame)

    def action_reload(self) -> None:
        self._history_for = None
        self.query_one(TimelinePane).reload()
        self.reload()
        self.say("reloaded")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(HELP))

    def action_quit_app(self) -> None:
        self._stop.set()
        self.exit(0)

    async def on_unmount(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            await asyncio.sleep(0)


def _haystack(row: SlotRow) -> str:
    return f"{row.name} {row.zone} {row.accelerator} {row.state} {row.want_cell()}".lower()


def _matches(row: SlotRow, needle: str) -> bool:
    """The filter box: ``owner:NAME`` keeps the slots NAME holds; other text is looked for in
    the row's name, zone, accelerator, state and want."""
    if needle.startswith("owner:"):
        return (row.owner or "").lower() == needle.removeprefix("owner:").strip()
    return needle in _haystack(row)
