"""What memory keeps of ``setup.at_boot`` and ``workload.before_end``, and its plain-dict form.

- ``BootSeen`` (per slot): what each worker of the node instance last reported of the boot
  script of one setup generation (``core/boot_setup.py`` folds the reports in; when every
  worker is done, the bootstrap step is recorded done for that instance and generation, like
  one run over SSH).
- ``EndsSeen`` (per slot): the attempt ``before_end`` last ran for, the ends it already ran
  before in that attempt (so a restarted controller never runs it twice), and how the last
  one went (``core/before_end.py``).

Values and (de)serialisation only; ``core/memory.py`` holds them in ``Memory`` (and refuses a
document whose times are not finite, these included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BootSeen:
    instance: str
    generation: int
    #: per worker, in order: done | running | failed | waiting (nothing reported yet)
    workers: tuple[str, ...] = ()
    detail: str = ""  # a failed worker's words: "02-install.sh exit 1 on worker 2"
    since: float = 0.0  # when this instance and generation were first looked at


@dataclass(frozen=True, slots=True)
class EndsSeen:
    run_id: str
    attempt: int
    done: tuple[str, ...] = ()  # the ends (``End.key``) it ran before in this attempt
    last: str = ""  # the last end's key
    last_at: str = ""  # that end, RFC 3339
    sent_at: float | None = None  # when it finished on the workers
    outcome: str = ""  # "ran on 4 workers", "exit 1 on worker 2"


def boot_to_dict(b: BootSeen) -> dict[str, Any]:
    return {
        "instance": b.instance,
        "generation": b.generation,
        "workers": list(b.workers),
        "detail": b.detail,
        "since": b.since,
    }


def boot_from_dict(d: Any) -> BootSeen:
    return BootSeen(
        instance=str(d["instance"]),
        generation=int(d["generation"]),
        workers=tuple(str(w) for w in d.get("workers", [])),
        detail=str(d.get("detail", "")),
        since=float(d.get("since", 0.0)),
    )


def ends_to_dict(e: EndsSeen) -> dict[str, Any]:
    return {
        "run_id": e.run_id,
        "attempt": e.attempt,
        "done": list(e.done),
        "last": e.last,
        "last_at": e.last_at,
        "sent_at": e.sent_at,
        "outcome": e.outcome,
    }


def ends_from_dict(d: Any) -> EndsSeen:
    sent = d.get("sent_at")
    return EndsSeen(
        run_id=str(d["run_id"]),
        attempt=int(d["attempt"]),
        done=tuple(str(k) for k in d.get("done", [])),
        last=str(d.get("last", "")),
        last_at=str(d.get("last_at", "")),
        sent_at=None if sent is None else float(sent),
        outcome=str(d.get("outcome", "")),
    )
