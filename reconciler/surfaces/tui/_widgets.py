"""The TUI's widgets: the slot table (cursor kept on its slot across refreshes) and the modal
screens (help, yes/no, the masked Tailscale key input).

May: render ``Frame`` values with Textual. May not: read files, apply edits, know the keys'
meaning (``_keys`` and ``_app`` do).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, ClassVar, Final

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Region, Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from reconciler.surfaces.tui._frame import COLUMNS, NARROW_STATES, SlotRow, fit_columns

#: Which theme colour each slot state is drawn in (resolved against the theme: dark or light).
STATE_COLOURS: Final = {
    "ACTIVE": "success",
    "FAILED": "error",
    "SUSPENDED": "error",
    "UNKNOWN": "warning",
    "WAITING_FOR_RESOURCES": "warning",
    "WAITING": "warning",
    "PROVISIONING": "accent",
    "CREATING": "accent",
    "ACCEPTED": "accent",
    "DELETING": "warning",
}
SETUP_COLOURS: Final = {"failed": "error", "pending": "warning", "done": "success"}
_STATE: Final = next(i for i, (_, key) in enumerate(COLUMNS) if key == "state")
_SETUP: Final = next(i for i, (_, key) in enumerate(COLUMNS) if key == "setup")
_FOR: Final = next(i for i, (_, key) in enumerate(COLUMNS) if key == "for")


class SlotTable(ScrollView, can_focus=True):
    """The slots, one line each, with a fixed header line and a fixed first column (slot).

    A line widget: only the lines on screen are drawn, each straight from its cells, so a
    1,000-slot table costs what its visible lines cost, and a controller pass that changes
    one slot redraws one line. ``show`` keeps the cursor on the slot it was on when rows come
    and go; the arrow, page, home and end keys move it, and so do k9s's ``j`` ``k`` ``g``
    ``G`` (left/right scroll sideways). A narrow terminal leaves out the columns of
    ``DROP_ORDER`` (zone stays) until the rest fit.
    """

    DEFAULT_CSS = """
    SlotTable { background: $surface; }
    SlotTable > .slot-table--header { text-style: bold; color: $text-primary; }
    SlotTable > .slot-table--cursor { background: $boost; text-style: bold; }
    SlotTable:focus > .slot-table--cursor { background: $block-cursor-background;
                                           color: $block-cursor-foreground; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"slot-table--header", "slot-table--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", show=False),
        Binding("down,j", "move(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home,g", "move_to(0)", show=False),
        Binding("end,G", "move_to(-1)", show=False),
        Binding("left", "scroll_left", show=False),
        Binding("right", "scroll_right", show=False),
    ]

    class Highlighted(Message):
        """The cursor is on another slot (or the same slot moved)."""

        def __init__(self, name: str | None) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: dict[str, tuple[str, ...]] = {}
        self._full: dict[str, tuple[str, ...]] = {}  # the cells before a narrow table's cuts
        self._shown: tuple[int, ...] = ()  # indexes into COLUMNS of the columns on screen
        self._widths: list[int] = []
        self.cursor_row = 0
        self._colours: Callable[[str], str] = lambda name: ""

    def set_colours(self, colours: Callable[[str], str]) -> None:
        self._colours = colours

    # -- the model -------------------------------------------------------------------------
    @property
    def selected(self) -> str | None:
        if not self._names or not 0 <= self.cursor_row < len(self._names):
            return None
        return self._names[self.cursor_row]

    @property
    def row_count(self) -> int:
        return len(self._names)

    def get_row_index(self, name: str) -> int:
        return self._index[name]

    def _fit(
        self, full: dict[str, tuple[str, ...]], width: int | None = None
    ) -> tuple[tuple[int, ...], bool]:
        """The columns that fit the screen (``width``: the screen's, when it is changing),
        and whether states are shortened (when any column is left out)."""
        room = max(1, (width or self.app.size.width) - 2)  # the vertical scrollbar
        shown = fit_columns(_widths(full.values(), len(COLUMNS)), room)
        if len(shown) == len(COLUMNS):
            return shown, False
        short = {n: _shorten(cells) for n, cells in full.items()}
        return fit_columns(_widths(short.values(), len(COLUMNS)), room), True

    def show(self, rows: Sequence[SlotRow], now: float, bucket: Sequence[str]) -> None:
        marked = set(bucket)
        full: dict[str, tuple[str, ...]] = {}
        for row in rows:
            cells = row.cells(now)
            full[row.name] = (("*" if row.name in marked else " ") + cells[0], *cells[1:])
        self._full = full
        shown, short = self._fit(full)
        table = {n: _shorten(c) for n, c in full.items()} if short else full
        if list(table) == self._names and shown == self._shown:
            self._update(table)
        else:
            self._rebuild(table, shown)

    def _update(self, table: dict[str, tuple[str, ...]]) -> None:
        """Rows already on screen whose cells changed: redraw those lines (all of them when
        a column's width changes)."""
        changed = [n for n, cells in table.items() if self._cells.get(n, cells) != cells]
        if not changed:
            return
        self._cells.update({n: table[n] for n in changed})
        widths = self._measure()
        if widths != self._widths:
            self._widths = widths
            self._resize()
            self.refresh()
            return
        for name in changed:
            self._refresh_row(self._index[name])

    def ages(self, rows: Sequence[SlotRow], now: float) -> None:
        """Redraw the "for" cell of ``rows`` (the clock moved; nothing else did)."""
        table: dict[str, tuple[str, ...]] = {}
        for row in rows:
            old = self._cells.get(row.name)
            if old is not None:
                age = row.cells(now)[_FOR]
                table[row.name] = (*old[:_FOR], age, *old[_FOR + 1 :])
                full = self._full.get(row.name)
                if full is not None:
                    self._full[row.name] = (*full[:_FOR], age, *full[_FOR + 1 :])
        self._update(table)

    def _rebuild(self, table: dict[str, tuple[str, ...]], shown: tuple[int, ...]) -> None:
        keep = self.selected
        self._shown = shown
        self._names = list(table)
        self._index = {name: i for i, name in enumerate(self._names)}
        self._cells = dict(table)
        self._widths = self._measure()
        if keep in self._index:
            self.cursor_row = self._index[keep]
        else:
            self.cursor_row = max(0, min(self.cursor_row, len(self._names) - 1))
        self._resize()
        self._scroll_to_cursor()
        self.refresh()
        if self.selected != keep:
            self.post_message(self.Highlighted(self.selected))

    def relayout(self, width: int) -> None:
        """After a resize to ``width`` columns: rebuild when the set of columns that fit
        changed."""
        shown, short = self._fit(self._full, width)
        if shown != self._shown:
            table = {n: _shorten(c) for n, c in self._full.items()} if short else self._full
            self._rebuild(table, shown)

    def _measure(self) -> list[int]:
        widths = [len(COLUMNS[i][0]) for i in self._shown]
        for cells in self._cells.values():
            for pos, i in enumerate(self._shown):
                width = cell_len(cells[i])
                if width > widths[pos]:
                    widths[pos] = width
        return widths

    def _resize(self) -> None:
        total = sum(w + 2 for w in self._widths)
        self.virtual_size = Size(total, len(self._names) + 1)

    # -- the cursor ------------------------------------------------------------------------
    def move_cursor(self, *, row: int, animate: bool = False) -> None:
        if not self._names:
            return
        row = max(0, min(row, len(self._names) - 1))
        if row == self.cursor_row:
            return
        old, self.cursor_row = self.cursor_row, row
        self._refresh_row(old)
        self._refresh_row(row)
        self._scroll_to_cursor()
        self.post_message(self.Highlighted(self.selected))

    def action_move(self, delta: int) -> None:
        self.move_cursor(row=self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(row=self.cursor_row + direction * max(1, self.size.height - 2))

    def action_move_to(self, row: int) -> None:
        self.move_cursor(row=row if row >= 0 else len(self._names) - 1)

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.size.height - 1 - self.scrollbar_size_horizontal)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)

    def _refresh_row(self, index: int) -> None:
        y = index - int(self.scroll_y) + 1
        if 0 < y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # -- drawing ---------------------------------------------------------------------------
    def _cells_strip(self, cells: Sequence[str], base: Style, colour: bool) -> list[Segment]:
        out: list[Segment] = []
        for pos, i in enumerate(self._shown):
            text = cells[i]
            style = base
            if colour:
                name = STATE_COLOURS if i == _STATE else SETUP_COLOURS if i == _SETUP else {}
                tint = self._colours(name.get(colour_key(text), "")) if name else ""
                if tint:
                    style = base + Style(color=tint)
            pad = self._widths[pos] - cell_len(text)
            out.append(Segment(f" {text}{' ' * pad} ", style))
        return out

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("slot-table--header")
            segments = self._cells_strip([label for label, _ in COLUMNS], style, False)
        else:
            index = int(self.scroll_y) + y - 1
            if index >= len(self._names):
                return Strip.blank(width, base)
            if index == self.cursor_row:
                style = base + self.get_component_rich_style("slot-table--cursor")
            else:
                style = base
            segments = self._cells_strip(self._cells[self._names[index]], style, True)
        if not segments:
            return Strip.blank(width, base)
        fixed = Strip(segments[:1])
        rest = Strip(segments[1:])
        scroll_x = int(self.scroll_x)
        room = max(0, width - fixed.cell_length)
        line = Strip.join([fixed, rest.crop(scroll_x, scroll_x + room)])
        return line.extend_cell_length(width, base).crop(0, width)


def colour_key(text: str) -> str:
    """The word a cell is coloured by: ``ACTIVE 5h12m left`` (a flex-start run) is ACTIVE."""
    return text.split(" ", 1)[0]


def _shorten(cells: tuple[str, ...]) -> tuple[str, ...]:
    state = NARROW_STATES.get(cells[_STATE], cells[_STATE])
    return (*cells[:_STATE], state, *cells[_STATE + 1 :])


def _widths(rows: Collection[tuple[str, ...]], count: int) -> list[int]:
    """Each column's width: its widest cell or its label."""
    widths = [len(label) for label, _ in COLUMNS[:count]]
    for i, column in enumerate(zip(*rows, strict=False)):
        if i < count:
            widths[i] = max(widths[i], max(map(cell_len, column)))
    return widths


class HelpScreen(ModalScreen[None]):
    """Every key, in sections; the list scrolls (arrows, ``j``/``k``, page keys, ``g``/``G``)
    when the terminal is shorter than it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "close"),
        Binding("down,j", "scroll(1)", show=False),
        Binding("up,k", "scroll(-1)", show=False),
        Binding("pagedown,space", "page(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("end,G", "ends(1)", show=False),
        Binding("home,g", "ends(-1)", show=False),
    ]

    def __init__(self, sections: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Keys (every edit goes through desired.yaml)", classes="title")
            with VerticalScroll(id="help-keys"):
                for title, keys in self.sections:
                    yield Static(title, classes="title")
                    yield Static(help_text(keys), markup=False)
            yield Static("j/k, arrows, pgup/pgdn, g/G scroll · escape closes", classes="hint")

    @property
    def _list(self) -> VerticalScroll:
        return self.query_one("#help-keys", VerticalScroll)

    def action_scroll(self, lines: int) -> None:
        self._list.scroll_relative(y=lines, animate=False)

    def action_page(self, direction: int) -> None:
        self._list.scroll_relative(y=direction * max(1, self._list.size.height - 1), animate=False)

    def action_ends(self, direction: int) -> None:
        if direction > 0:
            self._list.scroll_end(animate=False)
        else:
            self._list.scroll_home(animate=False)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


def help_text(keys: Sequence[tuple[str, str]]) -> str:
    """One line per key: the key, padded, then what it does."""
    width = max((len(key) for key, _ in keys), default=1)
    return "\n".join(f" {key:<{width}}  {what}" for key, what in keys)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: ``y`` answers yes; ``n`` or escape, no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.question)
            yield Static("y: yes   n/escape: no", classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class SecretScreen(ModalScreen[str | None]):
    """A masked input for a secret; the value goes to the callback, never to the screen."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.prompt)
            yield Input(password=True, id="secret")
            yield Static("enter saves, escape cancels", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
