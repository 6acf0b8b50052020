"""The TUI's bottom pane: switching it (``i l p e h u`` and the timeline's key) and filling the
panes that follow the selected slot: info and chips (``intent.views``, ``intent.chip_views``),
the workload's logs (the injected log source, ``_logs``), the capacity history
(``intent.history_views``) and the lab's timeline (``_timeline``, read through
``intent.timeline_views``).

``PaneViews`` is mixed into ``_app.TpuApp``, which composes the panes and owns the state declared
below; ``TpuApp.show`` and the selection call ``_pane_follow``. Each pane is filled on a worker
(a thread, or the logs' stream), and only when what it shows changed, so the UI never waits on
a file or on SSH.

May: read the state directory, the capacity history and the intent's views; read workload logs
through the injected log source. May not: edit the intent, call the cloud API, print.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work
from textual.app import App
from textual.widgets import ContentSwitcher, RichLog, Static

from reconciler.errors import ReconcilerError
from reconciler.surfaces.tui._frame import Frame, Holder, SlotRow, tilde
from reconciler.surfaces.tui._logs import UNAVAILABLE, LogSource, format_line
from reconciler.surfaces.tui._timeline import TimelinePane
from reconciler.surfaces.tui._widgets import SlotTable

if TYPE_CHECKING:
    from reconciler.intent.engine import IntentEditor
    from reconciler.intent.store import StateDir
    from reconciler.intent.timeline_views import LabTimeline


class PaneViews(App[int]):
    """The bottom pane and what fills it; ``TpuApp`` provides the rest."""

    frame: Frame | None
    pane: str
    state: StateDir
    clock: Callable[[], float]
    holder: Holder
    log_source: LogSource | None
    _logs_for: tuple[str | None, str | None, tuple[str, ...]] | None
    _info_for: tuple[str | None, float, str] | None
    _history_for: tuple[int, int] | None

    # Provided by ``TpuApp``:
    @property
    def editor(self) -> IntentEditor:
        raise NotImplementedError

    @property
    def selected(self) -> SlotRow | None:
        raise NotImplementedError

    def action_pane(self, name: str) -> None:
        self.pane = name
        switcher = self.query_one(ContentSwitcher)
        switcher.current = name
        switcher.set_class(name == "history", "tall")  # a plot needs the room (80x24 too)
        if name == "history":  # drawn for the width it has once it is laid out
            self.call_after_refresh(self._pane_follow)
        else:
            self._pane_follow()

    def _pane_follow(self) -> None:
        """Point the info and logs panes at the selected slot; draw the history pane when it
        is shown."""
        slot = self.query_one(SlotTable).selected
        if self.pane in ("info", "chips"):
            stamp = self.frame.now if self.frame else 0.0
            if self._info_for != (slot, stamp, self.pane):
                self._info_for = (slot, stamp, self.pane)
                self._load_info(slot, self.pane)
        elif self.pane == "logs":
            # Follow again when the slot's node changes: it became reachable (the pane said
            # there was none), or a new one replaced it.
            row = self.selected
            key = (slot, row.instance, row.ips) if row is not None else (slot, None, ())
            if key != self._logs_for:
                self._logs_for = key
                self._follow_logs(row)
        elif self.pane == "timeline":
            self.query_one(TimelinePane).follow(self.frame, slot)
        elif self.pane == "history":
            # Drawn again once a minute at most (the store changes slowly), or at another width.
            width = self.history_width()
            drawn = (int((self.frame.now if self.frame else 0.0) // 60), width)
            if drawn != self._history_for:
                self._history_for = drawn
                self._load_history(width)

    def history_width(self) -> int:
        """The columns a chart may take in the history pane: inside its padding, and clear of
        the scroll bar a long chart brings (else its right-hand labels are cut)."""
        log = self.query_one("#history", RichLog)
        return max(40, log.content_region.width - log.styles.scrollbar_size_vertical)

    @work(exclusive=True, group="history", thread=True)
    def _load_history(self, width: int) -> None:
        """The capacity history drawn as ``history --plot`` draws it, up to the clock's now."""
        from reconciler.intent.history_views import plot_until

        now = self.clock()
        try:
            text = plot_until(self.state.history, now=now, width=width)
        except ReconcilerError as e:
            text = str(e)
        self.call_from_thread(self._show_history, text)

    def _show_history(self, text: str) -> None:
        pane = self.query_one("#history", RichLog)
        pane.clear()
        pane.write(text.rstrip("\n"))
        # The first drawing may come before the pane's layout settled (its scroll bar, its
        # padding): look again once it has, and draw at the width it really has.
        self.call_after_refresh(self._pane_follow)

    @work(exclusive=True, group="info", thread=True)
    def _load_info(self, slot: str | None, pane: str = "info") -> None:
        from reconciler.intent import views
        from reconciler.intent.chip_views import format_chips

        shape = format_chips if pane == "chips" else views.format_slot_info
        if slot is None:
            text = "no slot selected"
        else:
            try:
                text = tilde(shape(views.slot_info(self.editor, slot)))
            except ReconcilerError as e:
                text = str(e)
        self.call_from_thread(self.query_one(f"#{pane}", Static).update, text)

    @work(exclusive=True, group="logs")
    async def _follow_logs(self, row: SlotRow | None) -> None:
        log = self.query_one("#logs", RichLog)
        log.clear()
        if self.log_source is None:
            log.write(UNAVAILABLE)
            return
        if row is None:
            log.write("no slot selected")
            return
        log.write(f"logs of {row.name}, every worker, following:")
        try:
            async for line in self.log_source(row):
                log.write(format_line(line))
        except ReconcilerError as e:
            # The pane does not wrap program output; a message of ours is folded to its width
            # instead of being cut off mid-sentence.
            width = max(20, log.size.width - 2)
            for part in textwrap.wrap(f"logs stopped: {e}", width) or [""]:
                log.write(part)

    def _read_timeline(self, since: float | None) -> LabTimeline:
        """The lab's timeline for its pane (on the pane's thread)."""
        from reconciler.intent.timeline_views import read

        return read(self.editor, since=since, holder=self.holder)
