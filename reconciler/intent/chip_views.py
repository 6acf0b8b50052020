"""The per-worker view of a slot's chips (the TUI's chips pane): one line per chip of every
worker, its TensorCore duty cycle, HBM in use of its total and the pids holding it.

Built from the ``slot_info`` document (``intent/views.py``: its ``chips``, from the
controller's snapshot with ``setup.telemetry``), so it says exactly what ``info`` and MCP say.

May: build text from a document. May not: do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

_GIB: Final = 1024**3

NONE: Final = (
    "no chip figures: the slot's workload is not running with setup.telemetry, "
    "or no worker has answered yet"
)


def _duty(value: Any) -> str:
    return "?" if value is None else f"{value:.0f}%"


def _hbm(used: Any, total: Any) -> str:
    if used is None or not total:
        return "?"
    return f"{used / _GIB:.1f}/{total / _GIB:.1f} GiB ({100 * used / total:.0f}%)"


def format_chips(doc: Mapping[str, Any]) -> str:
    """Every worker's chips of the slot in ``doc`` (a ``slot_info`` document)."""
    name = doc.get("name") or "?"
    chips = doc.get("chips") or {}
    if not chips:
        return f"{name}: {NONE}"
    rows = [("WORKER", "CHIP", "DUTY", "HBM", "HELD BY")]
    for w in chips.get("workers") or ():
        listed = w.get("chips") or ()
        if not listed:
            rows.append((f"w{w.get('index')}", "-", "?", "?", "not read this pass"))
        for i, chip in enumerate(listed):
            holders = chip.get("holders") or ()
            rows.append(
                (
                    f"w{w.get('index')}" if i == 0 else "",
                    str(chip.get("index")),
                    _duty(chip.get("duty_cycle")),
                    _hbm(chip.get("hbm_used"), chip.get("hbm_total")),
                    ", ".join(f"pid {p}" for p in holders) if holders else "-",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = ["  ".join(c.ljust(n) for c, n in zip(r, widths, strict=True)).rstrip() for r in rows]
    head = f"{name} chips: {chips.get('tpu')} (least busy worker)"
    error = (doc.get("observed") or {}).get("last_error")
    tail = [f"launch waits: {error}"] if isinstance(error, str) and "TPU held by" in error else []
    return "\n".join([head, *table, *tail])
