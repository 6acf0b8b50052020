"""The ``history`` and ``recommend`` documents (JSON, versioned) and their text renderings.

``tpu-reconciler.history.v1`` and ``tpu-reconciler.recommend.v1`` are described in
docs/json.md; the CLI prints them and the MCP tools ``capacity_history`` / ``recommend_zones``
return them, so both surfaces say the same thing.

May: build values and text. May not: do I/O, read a clock (``now`` is given), or print.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from reconciler.core.attempt_report import attempt_dict
from reconciler.core.capacity import (
    ExpectedWait,
    PlaceStats,
    Recommendation,
    race_group_yaml,
    rank,
)
from reconciler.core.history import Transition, WorkloadAttempt
from reconciler.model.accelerators import default_api, family_of
from reconciler.model.capacity import DEFAULT_API
from reconciler.model.durations import format_duration
from reconciler.model.times import utc_text

HISTORY_SCHEMA: Final = "tpu-reconciler.history.v1"
RECOMMEND_SCHEMA: Final = "tpu-reconciler.recommend.v1"
CSV_COLUMNS: Final = (
    "time",
    "slot",
    "zone",
    "accelerator",
    "mode",
    "before",
    "after",
    "code",
    "message",
    "api",
)


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return utc_text(epoch)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def place_dict(s: PlaceStats) -> dict[str, Any]:
    return {
        "zone": s.zone,
        "accelerator": s.accelerator,
        "mode": s.mode,
        "api": s.api,
        "samples": s.samples,
        "unserved": s.unserved,
        "waiting": s.waiting,
        "to_provisioning": {
            "p50_seconds": _r(s.p50_provisioning),
            "p90_seconds": _r(s.p90_provisioning),
        },
        "to_active": {"p50_seconds": _r(s.p50_active), "p90_seconds": _r(s.p90_active)},
        "expected_wait_seconds": _r(s.expected_wait),
        "median_lifetime_seconds": _r(s.median_lifetime),
        "preemptions": s.preemptions,
        "preemptions_per_day": None
        if s.preemptions_per_day is None
        else round(s.preemptions_per_day, 2),
        "failures": dict(s.failures),
        "queue_closed": s.queue_closed,
        "last_seen": _iso(s.last_seen),
    }


def history_doc(
    stats: Iterable[PlaceStats],
    *,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    since: float | None = None,
    attempts: Sequence[WorkloadAttempt] = (),
    api: str | None = None,
) -> dict[str, Any]:
    filters = {"zone": zone, "accelerator": accelerator, "mode": mode, "api": api}
    return {
        "schema_version": HISTORY_SCHEMA,
        "filters": {**filters, "since": _iso(since)},
        "places": [place_dict(s) for s in stats],
        "attempts": [attempt_dict(a) for a in attempts],  # newest first
    }


def _d(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def format_history(stats: Sequence[PlaceStats], filters: Mapping[str, str] | None = None) -> str:
    """The ``history`` table. ``filters``: the options that narrowed it (``zone``, ``since``,
    ...), named when nothing matched them (the store may hold other records); "no capacity
    history yet" is said only when nothing was filtered out."""
    if not stats:
        asked = ", ".join(f"{k}={v}" for k, v in (filters or {}).items())
        if asked:
            return f"No capacity history matches {asked}.\n"
        return "No capacity history yet (the controller records it while it runs).\n"
    header = (
        "ZONE",
        "ACCELERATOR",
        "MODE",
        "API",
        "SAMPLES",
        "TO PROV p50/p90",
        "TO ACTIVE p50/p90",
        "LIFETIME",
        "PREEMPT/DAY",
        "FAILURES",
    )
    rows = [header]
    for s in stats:
        failures = ", ".join(f"code {k}: {v}" for k, v in s.failures.items())
        if s.queue_closed:
            failures = "queue closed" + (f"; {failures}" if failures else "")
        rows.append(
            (
                s.zone,
                s.accelerator,
                s.mode,
                s.api,
                f"{s.samples}"
                + (f" (+{s.unserved} unserved)" if s.unserved else "")
                + (f" (+{s.waiting} waiting)" if s.waiting else ""),
                f"{_d(s.p50_provisioning)}/{_d(s.p90_provisioning)}",
                f"{_d(s.p50_active)}/{_d(s.p90_active)}",
                _d(s.median_lifetime),
                rate_text(s.preemptions, s.preemptions_per_day),
                failures or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def rate_text(preemptions: int, per_day_rate: float | None) -> str:
    """Preemptions per day of capacity held as a person should read it: a rate once a day of
    capacity was held (``0.50``, with the count while there are few: ``0.50 (n=1)``); before
    that what was seen (``1 in 24m held``), never one preemption in minutes extrapolated to
    ``59.99`` a day."""
    if per_day_rate is None:
        return "-"
    if preemptions == 0 or per_day_rate <= 0:
        return f"{per_day_rate:.2f}"
    held = preemptions / per_day_rate * 86400.0
    if held < 86400.0:
        return f"{preemptions} in {format_duration(held)} held"
    return f"{per_day_rate:.2f}" + (f" (n={preemptions})" if preemptions < 3 else "")


def csv_row(row: Transition) -> list[str]:
    """One ``history --export csv`` line from a stored transition."""
    return [
        _iso(row.at) or "",
        row.slot,
        row.zone,
        row.accelerator,
        row.mode,
        row.before or "",
        row.after or "",
        "" if row.code is None else str(row.code),
        row.message,
        row.api,
    ]


def recommend_doc(
    stats: Sequence[PlaceStats],
    accelerator: str,
    mode: str,
    *,
    count: int | None,
    group: str,
    slot_names: Sequence[str] | None = None,
    catalogue: Iterable[str] = (),
    api: str | None = None,
) -> dict[str, Any]:
    """Ranked places (a zone on an API) and the race group to paste. ``slot_names`` names the
    candidates (one per ranked place, in order); ``catalogue``: zones known to offer the
    family (listed as ``untried`` when history has nothing there); ``api``: that API's
    places only (None: every API's)."""
    picks = rank(stats, accelerator, mode, count=count, api=api)
    mine = [
        s
        for s in stats
        if s.accelerator == accelerator and s.mode == mode and (api is None or s.api == api)
    ]
    closed = sorted(_zone_on(s.zone, s.api, accelerator) for s in mine if s.queue_closed)
    seen = {s.zone for s in mine}
    names = (
        list(slot_names)
        if slot_names is not None
        else [f"{group}-{i + 1}" for i in range(len(picks))]
    )
    return {
        "schema_version": RECOMMEND_SCHEMA,
        "accelerator": accelerator,
        "mode": mode,
        "api": api,
        "zones": [_pick(p) for p in picks],
        "closed": closed,
        "untried": sorted(set(catalogue) - seen),
        "race_group": {"name": group, "count": 1, "slots": names[: len(picks)]} if picks else None,
        "race_group_yaml": race_group_yaml(
            group, accelerator, mode, picks, slot_names=names[: len(picks)]
        )
        if picks
        else None,
    }


def _zone_on(zone: str, api: str, accelerator: str) -> str:
    """``us-east5-b``; ``us-east5-b (compute)`` on another API than the accelerator's
    default (as the charts name a zone's series)."""
    return zone if api == default_api(family_of(accelerator) or "") else f"{zone} ({api})"


def _pick(p: Recommendation) -> dict[str, Any]:
    return {
        "zone": p.zone,
        "api": p.api,
        "expected_wait_seconds": _r(p.expected_wait),
        "samples": p.samples,
        "unserved": p.unserved,
        "waiting": p.waiting,
        "median_lifetime_seconds": _r(p.median_lifetime),
        "preemptions_per_day": None
        if p.preemptions_per_day is None
        else round(p.preemptions_per_day, 2),
    }


def format_recommend(doc: dict[str, Any]) -> str:
    on = f" on {doc['api']}" if doc.get("api") else ""
    lines = [f"Zones for {doc['accelerator']} ({doc['mode']}{on}), soonest capacity first:"]
    if not doc["zones"]:
        lines.append("  no history for this accelerator and mode yet")
    for i, z in enumerate(doc["zones"], 1):
        wait = z["expected_wait_seconds"]
        shown = f"~{format_duration(wait)}" if wait is not None else "never served yet"
        extra = f", {z['unserved']} gave up" if z["unserved"] else ""
        life = z["median_lifetime_seconds"]
        lived = f", lives ~{format_duration(life)}" if life is not None else ""
        where = _zone_on(z["zone"], z.get("api") or DEFAULT_API, doc["accelerator"])
        lines.append(f"  {i}. {where:<24} {shown} ({z['samples']} samples{extra}{lived})")
    if doc["closed"]:
        lines.append(f"Left out (queue closed to this project): {', '.join(doc['closed'])}")
    if doc["untried"]:
        lines.append(f"No history yet, known to offer it: {', '.join(doc['untried'])}")
    if doc["race_group_yaml"]:
        lines.append("")
        lines.append("Race group to paste into desired.yaml (or use --apply GROUP):")
        lines.append("")
        lines.append(doc["race_group_yaml"].rstrip("\n"))
    return "\n".join(lines) + "\n"


def waits_list(waits: Sequence[ExpectedWait]) -> list[dict[str, Any]]:
    """``expected_waits`` of ``plan --json``: one entry per waiting slot with history."""
    return [
        {"slot": w.slot, "zone": w.zone,
         "expected_wait": {"p50_seconds": _r(w.hint.p50_seconds), "samples": w.hint.samples}}
        for w in waits
    ]  # fmt: skip


def format_waits(waits: Sequence[ExpectedWait]) -> str:
    """The ``plan`` section: expected waits from the capacity history."""
    if not waits:
        return ""
    width = max(len(w.slot) for w in waits)
    lines = ["Expected wait for capacity (history):"]
    lines += [f"  {w.slot:<{width}}  {w.zone:<16} {w.text()}" for w in waits]
    return "\n".join(lines) + "\n"
