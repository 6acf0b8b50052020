"""The TUI's widgets: the slot table (cursor kept on its slot across refreshes) and the modal
screens (help, yes/no, the masked Tailscale key input).

May: render ``Frame`` values with Textual. May not: read files, apply edits, know the keys'
meaning (``_keys`` and ``_app`` do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Final

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import CellKey, RowKey

from reconciler.surfaces.tui._frame import COLUMNS, SlotRow

#: Which theme colour each slot state is drawn in (resolved against the theme: dark or light).
STATE_COLOURS: Final = {
    "ACTIVE": "success",
    "FAILED": "error",
    "SUSPENDED": "error",
    "UNKNOWN": "warning",
    "WAITING_FOR_RESOURCES": "warning",
    "PROVISIONING": "accent",
    "CREATING": "accent",
    "ACCEPTED": "accent",
    "DELETING": "warning",
}
SETUP_COLOURS: Final = {"failed": "error", "pending": "warning", "done": "success"}
#: Below this width the table leaves out these columns.
NARROW_BELOW: Final = 130
NARROW_HIDDEN: Final = ("zone", "accelerator", "mode")
_STATE: Final = next(i for i, (_, key) in enumerate(COLUMNS) if key == "state")
_SETUP: Final = next(i for i, (_, key) in enumerate(COLUMNS) if key == "setup")
_FOR: Final = next(i for i, (_, key) in enumerate(COLUMNS) if key == "for")


class SlotTable(DataTable[Text | str]):
    """The slots, one row each, keyed by slot name. ``show`` updates only the cells that
    changed when the rows are the same slots in the same order (a pass of the controller),
    and rebuilds otherwise, putting the cursor back on the slot it was on."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", fixed_columns=1, zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._names: list[str] = []
        self._cells: dict[str, tuple[str, ...]] = {}
        self._shown: tuple[int, ...] = ()  # indexes into COLUMNS of the columns on screen
        self._colours: Callable[[str], str] = lambda name: ""

    def set_colours(self, colours: Callable[[str], str]) -> None:
        self._colours = colours

    @property
    def selected(self) -> str | None:
        if not self._names or not 0 <= self.cursor_row < len(self._names):
            return None
        return self._names[self.cursor_row]

    def _columns_for(self, width: int) -> tuple[int, ...]:
        """Every column; in a narrow terminal without zone, accelerator and mode (the slot's
        name carries them, the info pane shows them)."""
        hidden = NARROW_HIDDEN if width < NARROW_BELOW else ()
        return tuple(i for i, (_, key) in enumerate(COLUMNS) if key not in hidden)

    def _styled(self, cells: tuple[str, ...]) -> list[Text | str]:
        out: list[Text | str] = list(cells)
        for index, colours in ((_STATE, STATE_COLOURS), (_SETUP, SETUP_COLOURS)):
            colour = self._colours(colours.get(cells[index], ""))
            if colour:
                out[index] = Text(cells[index], style=colour)
        return [out[i] for i in self._shown]

    def show(self, rows: Sequence[SlotRow], now: float, bucket: Sequence[str]) -> None:
        marked = set(bucket)
        table: dict[str, tuple[str, ...]] = {}
        for row in rows:
            cells = row.cells(now)
            mark = "*" if row.name in marked else " "
            table[row.name] = (mark + cells[0], *cells[1:])
        names = list(table)
        shown = self._columns_for(self.app.size.width)
        if names == self._names and shown == self._shown:
            self._update(table)
            return
        self._rebuild(table, shown)

    def _update(self, table: dict[str, tuple[str, ...]]) -> None:
        """Change the cells that differ, of rows already on screen."""
        for name, cells in table.items():
            old = self._cells.get(name)
            if old is None or old == cells:
                continue
            styled = self._styled(cells)
            for pos, i in enumerate(self._shown):
                if old[i] != cells[i]:
                    self.update_cell(name, COLUMNS[i][1], styled[pos], update_width=True)
            self._cells[name] = cells

    def ages(self, rows: Sequence[SlotRow], now: float) -> None:
        """Redraw the "for" cell of ``rows`` (the clock moved; nothing else did)."""
        table: dict[str, tuple[str, ...]] = {}
        for row in rows:
            old = self._cells.get(row.name)
            if old is not None:
                table[row.name] = (*old[:_FOR], row.cells(now)[_FOR], *old[_FOR + 1 :])
        self._update(table)

    def _rebuild(self, table: dict[str, tuple[str, ...]], shown: tuple[int, ...]) -> None:
        keep = self.selected
        self.clear(columns=shown != self._shown)
        if shown != self._shown:
            self._shown = shown
            for i in shown:
                self.add_column(COLUMNS[i][0], key=COLUMNS[i][1])
        self._names, self._cells = list(table), table
        for name, cells in table.items():
            self.add_row(*self._styled(cells), key=name)
        if keep in table:
            self.move_cursor(row=self._names.index(keep), animate=False)
        elif table:
            self.move_cursor(row=min(self.cursor_row, len(table) - 1), animate=False)

    # DataTable measures every cell with Rich to size its columns: seconds for 1,000 rows,
    # again on every width-changing update. These cells are one line of text, so their width
    # is their cell length (same result, a hundred times cheaper). Textual is pinned <9.
    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        columns = self.ordered_columns
        for row_key in new_rows:
            cells = self._data.get(row_key)
            if cells is None:
                continue
            for column in columns:
                width = _width(cells.get(column.key, ""))
                if width > column.content_width:
                    column.content_width = width
        width = sum(column.get_render_width(self) for column in self.columns.values())
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(
            width + self._row_label_column_width, self._total_row_height + header
        )

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        for column_key in {cell.column_key for cell in updated_cells}:
            column = self.columns.get(column_key)
            if column is None:
                continue
            widths = [_width(row.get(column_key, "")) for row in self._data.values()]
            column.content_width = max([*widths, _width(column.label)])
        self._require_update_dimensions = True

    def relayout(self) -> None:
        """After a resize: rebuild when the set of columns that fit changed."""
        shown = self._columns_for(self.app.size.width)
        if shown != self._shown and self._cells:
            self._rebuild(self._cells, shown)


def _width(cell: object) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        text = "\n".join(f" {key:<3} {what}" for key, what in self.keys)
        with Vertical(id="dialog"):
            yield Static("Keys (every edit goes through desired.yaml)", classes="title")
            yield Static(text)
            yield Static("escape closes", classes="hint")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


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
