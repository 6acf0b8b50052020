"""The TUI's timeline pane (``m``): the lab's timeline as ``tpu-reconciler timeline`` draws it,
in colour, with the slot selected in the table highlighted and kept in view, ←/→ to scroll in
time and +/- to zoom (while the pane is shown; elsewhere ←/→ scroll the table).

``TimelinePane`` draws ``core.timeline_text``'s cells (``intent.timeline_views.pane_chart``),
styled by the theme's colours, over its own view ``[start, end]`` (the timeline's window at
first); the picture is read on a thread (``intent.timeline_views.read``: the snapshot, the
file, the history) again when the controller observes anew, at most once a minute, or when the
view scrolls before what was read. Every cell keeps its character, so it reads the same in a
light theme and without colour (``NO_COLOR``). ``TimelineKeys`` is mixed into ``_app.TpuApp``:
its keys are priority bindings that are on only while the pane is shown.

May: read the snapshot, the file, the lock and the capacity history. May not: edit, call the
cloud, print.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import Input, Static

from reconciler.errors import ReconcilerError

if TYPE_CHECKING:
    from reconciler.intent.timeline_views import LabTimeline
    from reconciler.surfaces.tui._frame import Frame

PANE: Final = "timeline"
KEY: Final = ("m", "timeline pane: who holds what, when; estimated starts (← → + - in it)")
MOVES: Final = ("← → + -", "in the timeline pane: scroll in time, zoom in and out")
#: Narrowest and widest view (seconds).
MIN_SPAN: Final = 3600.0
MAX_SPAN: Final = 30 * 86400.0
#: A style name of ``core.timeline_text`` -> (theme colour, and how it is drawn).
STYLES: Final = {
    "held": ("success", ""),
    "queued": ("warning", ""),
    "waiting": ("primary", "bold"),
    "dead": ("", ""),
    "estimate": ("accent", "italic"),
    "preempted": ("error", "bold"),
    "mark": ("", "bold"),
    "maintenance": ("warning", "bold"),
    "now": ("", "bold"),
    "axis": ("", "dim"),
    "title": ("", "bold"),
    "group": ("", "bold underline"),
    "note": ("", "italic"),
    "selected": ("", "reverse bold"),
}

Load = Callable[[float | None], "LabTimeline"]


class TimelinePane(Static):
    """The pane. ``load(since)`` reads the picture (None: its own window), on a thread."""

    def __init__(self, load: Load, colour: Callable[[str], str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._read = load
        self._colour = colour
        self.timeline: LabTimeline | None = None
        self.view: tuple[float, float] | None = None
        self.selected: str | None = None
        self._loaded_for: object = None
        self._since: float | None = None
        self._top = 0  # the first row line shown

    # -- reading ---------------------------------------------------------------------------
    def follow(self, frame: Frame | None, selected: str | None) -> None:
        """Show ``selected``; read the picture again when the controller looked anew, at most
        once a minute."""
        self.selected = selected
        key = (frame.observed_at, int(frame.now // 60)) if frame is not None else None
        if key != self._loaded_for:
            self._loaded_for = key
            self._load()
        else:
            self.draw()

    def reload(self) -> None:
        self._loaded_for = None

    @work(exclusive=True, group="timeline", thread=True)
    def _load(self) -> None:
        try:
            found: LabTimeline | str = self._read(self._since)
        except ReconcilerError as e:
            found = str(e)
        self.app.call_from_thread(self._loaded, found)

    def _loaded(self, found: LabTimeline | str) -> None:
        if isinstance(found, str):
            self.update(found)
            return
        self.timeline = found
        if self.view is None:
            self.view = (found.since, found.until)
        self.draw()

    # -- the view --------------------------------------------------------------------------
    def scroll_time(self, fraction: float) -> None:
        """Move the view by ``fraction`` of its span (negative: into the past)."""
        if self.view is None:
            return
        start, end = self.view
        shift = (end - start) * fraction
        self.view = (start + shift, end + shift)
        self._read_back()
        self.draw()

    def zoom(self, factor: float) -> None:
        """Make the view ``factor`` times as long, around now when it is in view."""
        if self.view is None or self.timeline is None:
            return
        start, end = self.view
        span = min(MAX_SPAN, max(MIN_SPAN, (end - start) * factor))
        at = self.timeline.as_of
        centre = at if start <= at <= end else (start + end) / 2
        share = (centre - start) / (end - start)
        self.view = (centre - span * share, centre + span * (1 - share))
        self._read_back()
        self.draw()

    def _read_back(self) -> None:
        """Read the history again from further back when the view starts before it."""
        if self.view is None or self.timeline is None or self.view[0] >= self.timeline.since:
            return
        self._since = self.view[0] - (self.view[1] - self.view[0])
        self._load()

    # -- drawing ---------------------------------------------------------------------------
    def on_resize(self) -> None:
        self.draw()

    def draw(self) -> None:
        from reconciler.intent.timeline_views import pane_chart, selected_words

        t = self.timeline
        if t is None or self.view is None:
            return
        width, height = max(40, self.content_size.width), max(4, self.content_size.height)
        lines = pane_chart(t, width, start=self.view[0], end=self.view[1], selected=self.selected)
        lines = lines[1:]  # the pane needs no title
        head = next(
            (i for i, line in enumerate(lines) if line and line[0][1] == "group"), len(lines)
        )
        body = lines[head:]
        words = selected_words(t, self.selected, width)[: 1 if height < 10 else 2]
        room = max(1, height - head - len(words))
        chosen = next((i for i, line in enumerate(body) if line and line[0][1] == "selected"), None)
        if chosen is not None and not self._top <= chosen < self._top + room:
            self._top = max(0, chosen - room + 1) if chosen >= self._top else chosen
        self._top = min(self._top, max(0, len(body) - room))
        rows = body[self._top : self._top + room]
        if len(rows) > 1 and rows[-1] and rows[-1][0][1] == "group":
            rows = rows[:-1]  # a group's heading without its first row waits for the next
        shown = lines[:head] + rows
        text = Text()
        for n, line in enumerate([*shown, *([[(w, "note")] for w in words])]):
            if n:
                text.append("\n")
            for cell, style in line:
                text.append(cell, self._style(style))
        self.update(text)

    def _style(self, name: str) -> Style:
        colour, how = STYLES.get(name, ("", ""))
        value = self._colour(colour) if colour else ""
        return Style.parse(" ".join(x for x in (how, value) if x) or "none")


class TimelineKeys(App[int]):
    """←/→ and +/- for the timeline pane, on only while it is shown (else ←/→ reach the
    table). Mixed into ``TpuApp``, which has ``pane``."""

    pane: str
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "timeline_scroll(-0.25)", show=False, priority=True),
        Binding("right", "timeline_scroll(0.25)", show=False, priority=True),
        Binding("plus,equals_sign", "timeline_zoom(0.5)", show=False, priority=True),
        Binding("minus", "timeline_zoom(2.0)", show=False, priority=True),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("timeline_scroll", "timeline_zoom"):
            typing = isinstance(self.focused, Input)  # the filter box keeps its arrows
            return self.pane == PANE and not self.screen.is_modal and not typing
        return super().check_action(action, parameters)

    def action_timeline_scroll(self, fraction: float) -> None:
        self.query_one(TimelinePane).scroll_time(fraction)

    def action_timeline_zoom(self, factor: float) -> None:
        self.query_one(TimelinePane).zoom(factor)
