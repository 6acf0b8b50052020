"""The TUI's widgets: the slot table (cursor kept on its slot across refreshes) and the modal
screens (help, yes/no, the masked Tailscale key input).

May: render ``Frame`` values with Textual. May not: read files, apply edits, know the keys'
meaning (``_keys`` and ``_app`` do).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Final

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

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


class SlotTable(DataTable[Text | str]):
    """The slots, one row each, keyed by slot name. ``show`` updates only the cells that
    changed when the rows are the same slots in the same order (a pass of the controller),
    and rebuilds otherwise, putting the cursor back on the slot it was on."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", fixed_columns=1, zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._names: list[str] = []
        self._cells: dict[str, tuple[str, ...]] = {}
        self._colours: Callable[[str], str] = lambda name: ""

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def set_colours(self, colours: Callable[[str], str]) -> None:
        self._colours = colours

    @property
    def selected(self) -> str | None:
        if not self._names or not 0 <= self.cursor_row < len(self._names):
            return None
        return self._names[self.cursor_row]

    def _styled(self, cells: tuple[str, ...]) -> list[Text | str]:
        out: list[Text | str] = list(cells)
        state, setup = cells[5], cells[9]
        colour = self._colours(STATE_COLOURS.get(state, ""))
        if colour:
            out[5] = Text(state, style=colour)
        colour = self._colours(SETUP_COLOURS.get(setup, ""))
        if colour:
            out[9] = Text(setup, style=colour)
        return out

    def show(self, rows: Sequence[SlotRow], now: float, bucket: Sequence[str]) -> None:
        marked = set(bucket)
        table: dict[str, tuple[str, ...]] = {}
        for row in rows:
            cells = row.cells(now)
            mark = "*" if row.name in marked else " "
            table[row.name] = (mark + cells[0], *cells[1:])
        names = list(table)
        if names == self._names:
            keys = [key for _, key in COLUMNS]
            for name, cells in table.items():
                old = self._cells.get(name)
                if old == cells:
                    continue
                styled = self._styled(cells)
                for i, key in enumerate(keys):
                    if old is None or old[i] != cells[i]:
                        self.update_cell(name, key, styled[i], update_width=True)
            self._cells = table
            return
        keep = self.selected
        self.clear()
        self._names, self._cells = names, table
        self.add_rows_keyed(table)
        if keep in table:
            self.move_cursor(row=names.index(keep), animate=False)
        elif names:
            self.move_cursor(row=min(self.cursor_row, len(names) - 1), animate=False)

    def add_rows_keyed(self, table: dict[str, tuple[str, ...]]) -> None:
        for name, cells in table.items():
            self.add_row(*self._styled(cells), key=name)


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
