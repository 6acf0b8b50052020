"""The TUI's key handling that is not drawing: the result line, each edit key's action,
proposing its edit (asking, or arming a key to be pressed twice), applying it on a thread, and
the keys that act locally.

``KeyActions`` is mixed into ``_app.TpuApp``, which binds the keys and owns the state declared
below. An edit key's proposal comes from the pure ``_keys``; ``_edit_key`` runs it: a refusal
is said on the result line, ``twice`` arms the key for ``_keys.TWICE_WINDOW`` seconds, ``ask``
opens a confirm dialog, and the edit is applied through ``IntentEditor.apply`` (source
``tui``) on a thread worker, so the UI never waits on the file lock. An edit the engine
refuses for want of confirmation arms the same key with the confirmed edit.

May: apply intent edits, close a slot's tmux window (``intent.tmux``), copy to the clipboard,
store the Tailscale key in the secret store. May not: call the cloud API, print.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.widgets import Static

from reconciler.errors import EditConflict, NeedsConfirmation, ReconcilerError
from reconciler.surfaces.tui import _keys
from reconciler.surfaces.tui._frame import Frame, SlotRow
from reconciler.surfaces.tui._widgets import ConfirmScreen, SecretScreen, SlotTable

if TYPE_CHECKING:
    from pathlib import Path

    from reconciler.intent.engine import IntentEditor
    from reconciler.intent.store import StateDir


class KeyActions(App[int]):
    """The result line, edit proposals and the local keys; ``TpuApp`` provides the rest."""

    frame: Frame | None
    bucket: tuple[str, ...]
    state: StateDir
    path: Path
    env: dict[str, str] | None
    edits_done: int
    _armed: tuple[str, str | None, float, Any] | None

    # Provided by ``TpuApp``:
    @property
    def editor(self) -> IntentEditor:
        raise NotImplementedError

    @property
    def selected(self) -> SlotRow | None:
        raise NotImplementedError

    def show(self, frame: Frame) -> None:
        raise NotImplementedError

    def full_frame(self, changed: Collection[str] | None = None) -> Frame:
        raise NotImplementedError

    # -- the result line -------------------------------------------------------------------
    def say(self, text: str, *, error: bool = False) -> None:
        result = self.query_one("#result", Static)
        result.update(text.replace("\n", " "))
        result.set_class(error, "error")

    # -- keys that edit --------------------------------------------------------------------
    def _propose(self, key: str, make: Callable[[], _keys.Proposal]) -> None:
        try:
            proposal = make()
        except _keys.Refusal as e:
            self.say(str(e), error=True)
            return
        slot = self.query_one(SlotTable).selected
        if proposal.twice and not self._second_press(key, slot):
            self._arm(key, slot, proposal)
            self.say(proposal.twice)
            return
        self._armed = None
        if proposal.ask:

            def answered(yes: bool | None) -> None:
                if yes:
                    self._apply(key, proposal)
                else:
                    self.say("nothing changed")

            self.push_screen(ConfirmScreen(proposal.ask), answered)
            return
        self._apply(key, proposal)

    def _arm(self, key: str, slot: str | None, what: Any) -> None:
        self._armed = (key, slot, time.monotonic() + _keys.TWICE_WINDOW, what)

    def _second_press(self, key: str, slot: str | None) -> bool:
        armed = self._armed
        return (
            armed is not None
            and armed[0] == key
            and armed[1] == slot
            and time.monotonic() <= armed[2]
        )

    def _apply(self, key: str, proposal: _keys.Proposal) -> None:
        self._apply_in_thread(key, proposal, self.query_one(SlotTable).selected)

    @work(thread=True, group="edits")
    def _apply_in_thread(self, key: str, proposal: _keys.Proposal, slot: str | None) -> None:
        from dataclasses import replace

        try:
            result = self.editor.apply(proposal.edit, source="tui", confirmed=proposal.confirmed)
        except NeedsConfirmation as e:
            again = replace(proposal, twice=None, confirmed=True)
            self.call_from_thread(self._arm, key, slot, again)
            self.call_from_thread(self.say, f"{e.message.split(';')[0]}: press {key} again")
            return
        except EditConflict as e:
            self.call_from_thread(self.say, f"try again: {e}", error=True)
            return
        except ReconcilerError as e:
            self.call_from_thread(self.say, f"refused: {e}", error=True)
            return
        self.edits_done += 1
        line = _keys.result_line(result.status, result.notes, result.slots)
        if key == "B":
            # The bucket became the race group: the next one starts empty, and the next B
            # reads the group as this edit left it (the watcher would, a second on).
            self.bucket = ()
            frame = self.full_frame({self.path.name}) if result.status == "changed" else None
            frame = frame or self.frame
            if frame is not None:
                self.call_from_thread(self.show, frame)
        self.call_from_thread(self.say, line)

    def _rearmed(self, key: str) -> _keys.Proposal | None:
        """A proposal armed by a refusal that needed confirmation, pressed again."""
        armed = self._armed
        slot = self.query_one(SlotTable).selected
        if (
            armed is not None
            and isinstance(armed[3], _keys.Proposal)
            and armed[3].twice is None
            and self._second_press(key, slot)
        ):
            self._armed = None
            return armed[3]
        return None

    def _edit_key(self, key: str, make: Callable[[], _keys.Proposal]) -> None:
        again = self._rearmed(key)
        if again is not None:
            self._apply(key, again)
            return
        self._propose(key, make)

    # -- the edit keys (``TpuApp.BINDINGS`` binds them) ------------------------------------
    def action_hold(self) -> None:
        self._edit_key("c", lambda: _keys.hold(self.selected))

    def action_hold_all(self) -> None:
        frame = self.frame
        if frame is not None:
            self._edit_key("a", lambda: _keys.hold_all(frame))

    def action_bucket(self) -> None:
        try:
            self.bucket = _keys.toggle_bucket(self.bucket, self.selected)
        except _keys.Refusal as e:
            self.say(str(e), error=True)
            return
        self.say(f"bucket: {', '.join(self.bucket) or 'empty'}")
        if self.frame is not None:
            self.show(self.frame)

    def action_race_bucket(self) -> None:
        frame = self.frame
        if frame is not None:
            self._edit_key("B", lambda: _keys.race_bucket(frame, self.bucket))

    def action_release(self) -> None:
        self._edit_key("d", lambda: _keys.release(self.selected))

    def action_open_tmux(self) -> None:
        self._edit_key("o", lambda: _keys.tmux_open(self.selected))

    def action_rerun_setup(self) -> None:
        self._edit_key("S", lambda: _keys.rerun_setup(self.selected))

    def action_tailscale_on(self) -> None:
        self._edit_key("T", lambda: _keys.tailscale_on(self.selected))

    def action_restart_workload(self) -> None:
        self._edit_key("w", lambda: _keys.restart_workload(self.frame, self.selected))

    # -- keys that act locally -------------------------------------------------------------
    def action_close_tmux(self) -> None:
        try:
            prompt = _keys.close_tmux(self.selected)
        except _keys.Refusal as e:
            self.say(str(e), error=True)
            return
        slot = self.query_one(SlotTable).selected
        if not self._second_press("x", slot):
            self._arm("x", slot, None)
            self.say(prompt)
            return
        self._armed = None
        if slot is not None:
            self._close_tmux(slot)

    @work(exclusive=True, group="tmux")
    async def _close_tmux(self, slot: str) -> None:
        from reconciler.intent.tmux import REOPEN_NOTE, close_window

        try:
            closed = await close_window(self.editor, slot)
        except ReconcilerError as e:
            self.say(f"tmux: {e}", error=True)
            return
        self.say(f"closed {', '.join(closed)}; {REOPEN_NOTE}" if closed else "no window was open")

    def action_copy_ssh(self) -> None:
        slot = self.query_one(SlotTable).selected
        if slot is None:
            self.say("no slot selected", error=True)
            return
        self._copy_ssh(slot)

    @work(exclusive=True, group="clipboard", thread=True)
    def _copy_ssh(self, slot: str) -> None:
        from reconciler.intent import views
        from reconciler.surfaces.tui._clipboard import copy_local

        try:
            command = str(views.ssh_command(self.editor, slot)["command"])
        except ReconcilerError as e:
            self.call_from_thread(self.say, str(e), error=True)
            return
        self.call_from_thread(self.copy_to_clipboard, command)  # OSC 52
        tool = copy_local(command, self.env)
        via = "OSC 52" + (f" and {tool}" if tool else "")
        self.call_from_thread(self.say, f"copied ({via}): {command}")

    def action_tailscale_key(self) -> None:
        def save(value: str | None) -> None:
            if value:
                self._save_key(value)
            else:
                self.say("nothing saved")

        self.push_screen(SecretScreen("Tailscale auth key (input hidden):"), save)

    @work(exclusive=True, group="secret", thread=True)
    def _save_key(self, value: str) -> None:
        from reconciler.intent.secret_store import TAILSCALE, save_secret

        try:
            where = save_secret(self.state.root, TAILSCALE, value)
        except (ValueError, OSError, ReconcilerError) as e:  # messages never carry the value
            text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            self.call_from_thread(self.say, f"not saved: {text}", error=True)
            return
        self.call_from_thread(self.say, f"saved the Tailscale key in {where} (0600); T turns it on")
