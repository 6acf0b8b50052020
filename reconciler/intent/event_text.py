"""One event of the controller's log as a line for a person: ``TIME  KIND  SLOT  what``, the
UTC time to the second, the kind, the slot (``-`` for none) and its salient fields (a failure
in the cloud's own words). Control characters in any text are escaped, so a hostile message
cannot drive the terminal. Used by ``tpu-reconciler events`` and the TUI's events pane.

May: make text. May not: read or print anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from reconciler.core.terminal_text import escaped

_SHOWN_ALREADY: Final = frozenset({"ts", "seq", "kind", "slot"})


def _clean(value: Any) -> str:
    """One line: lines joined with ``; ``, tabs as spaces; other control characters
    (a terminal escape) shown escaped, never sent to the terminal."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    lines = text.splitlines()
    if len(lines) > 1:  # (the line's own padding, runs of spaces, stays as it is)
        text = "; ".join(line.strip() for line in lines if line.strip())
    return escaped(text.replace("\t", " "))


def _secs(value: Any) -> str:
    return f"{value:.0f}s" if isinstance(value, int | float) else "?"


def _qr_state(r: Mapping[str, Any]) -> str:
    return f"{r.get('before') or 'absent'} -> {r.get('after') or 'gone'} in {r.get('zone', '?')}"


def _started(r: Mapping[str, Any]) -> str:
    flag = " [destructive]" if r.get("destructive") else ""
    return f"{r.get('action')} in {r.get('zone', '?')}: {r.get('reason', '')}{flag}"


def _failed(r: Mapping[str, Any]) -> str:
    retry = r.get("retry")
    when = "permanent, not retried" if retry == "permanent" else f"retry in {_secs(r.get('delay'))}"
    return f"{r.get('action')} failed ({when}): {r.get('error')}"


def _observe_failed(r: Mapping[str, Any]) -> str:
    when = "permanent" if r.get("retry") == "permanent" else f"retry in {_secs(r.get('delay'))}"
    return f"{r.get('error')} ({when})"


def _invalid(r: Mapping[str, Any]) -> str:
    errors = r.get("errors") or []
    kept = "last valid intent stays in force" if r.get("in_force") else "nothing is in force"
    return f"{'; '.join(str(e) for e in errors)} ({kept})"


def _loaded(r: Mapping[str, Any]) -> str:
    n = r.get("slots")
    return f"{n} slot{'' if n == 1 else 's'} (sha256 {str(r.get('digest'))[:12]})"


_SALIENT: Final[Mapping[str, Callable[[Mapping[str, Any]], str]]] = {
    "qr.state": _qr_state,
    "action.started": _started,
    "action.succeeded": lambda r: f"{r.get('action')} {r.get('outcome', 'done')}",
    "action.failed": _failed,
    "action.cancelled": lambda r: f"{r.get('action')} cancelled",
    "observe.failed": _observe_failed,
    "desired.loaded": lambda r: _loaded(r),
    "desired.valid": lambda r: f"valid again, as in force: {_loaded(r)}",
    "desired.invalid": _invalid,
    "controller.started": lambda r: f"pid {r.get('pid')}, {r.get('file')}",
    "controller.stopped": lambda r: f"pid {r.get('pid')}",
    "node.health": lambda r: "; ".join(map(str, r.get("signals") or [])) or "healthy again",
    "notify.sent": lambda r: str(r.get("event")),
    "notify.failed": lambda r: f"{r.get('event')}: {r.get('error')}",
}


def format_event(record: Mapping[str, Any], slot_width: int = 0) -> str:
    """One line for a person; the slot padded to ``slot_width``. Unknown kinds show their
    fields as ``name=value``."""
    ts = str(record.get("ts", "?"))
    if len(ts) > 20 and ts.endswith("Z") and "." in ts:
        ts = ts[: ts.index(".")] + "Z"
    kind = str(record.get("kind", "?"))
    salient = _SALIENT.get(kind)
    if salient is not None:
        what = salient(record)
    else:
        what = " ".join(f"{k}={_clean(v)}" for k, v in record.items() if k not in _SHOWN_ALREADY)
    slot = str(record.get("slot") or "-")
    return _clean(f"{ts}  {kind:<18} {slot:<{slot_width}}  {what}".rstrip())
