"""Machinery shared by the reliability suite: plain helpers, no pytest fixtures.

- ``profile()``: ``RELIABILITY_PROFILE=full`` (set by scripts/reliability.py) scales every count
  up to the full run; anything else is the short CI run.
- ``record_figures()``: each test appends what it did (cycles, faults, cases, violations) as a
  JSON line to ``$RELIABILITY_FIGURES`` when set; scripts/reliability.py adds them up.
- ``Tap`` sits in front of an ``Emulator``'s request entry point (``serve_api``): it injects
  faults at a rate through the emulator's own ``inject_fault`` (scoped to the method and exact
  path of the request about to be served, so the fault lands on that request or an identical
  one), logs every API request with wall-clock times and status, and snapshots the world after
  each queued-resource list (what a controller observed) and on arrival of each DELETE (what it
  deleted).
- ``Oracle``: the intent and the safety rules, written independently of ``core.plan`` — a check
  that reused the planner would agree with any bug in it.
- ``ControllerProcess``: ``python -m reconciler -f F --state-dir D run``, killable with SIGKILL.
- ``StatusWatcher``: re-reads status.json in a loop; every read must be complete JSON.

Everything binds to 127.0.0.1 (the emulator's default host) and is bounded in time.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Self

from reconciler.emulator import Emulator, Fault
from reconciler.model.desired import Desired, RaceGroupSpec, SlotSpec
from reconciler.runtime.events import log_files
from tests.support.cli import CLI_ARGV
from tests.support.waiting import wait_until as wait_until  # the tests import it from here

REPO: Final = Path(__file__).resolve().parents[2]
PROFILE_ENV: Final = "RELIABILITY_PROFILE"
FIGURES_ENV: Final = "RELIABILITY_FIGURES"

DEAD: Final = frozenset({"SUSPENDED", "FAILED"})
WON: Final = frozenset({"PROVISIONING", "ACTIVE"})
QUEUED: Final = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"})
MANAGED: Final = ("managed-by", "tpu-reconciler")

Key = tuple[str, str]  # (zone, name)


def profile() -> str:
    return "full" if os.environ.get(PROFILE_ENV, "").strip().lower() == "full" else "ci"


def full() -> bool:
    return profile() == "full"


def record_figures(test: str, **figures: Any) -> None:
    """Append ``{"test": ..., "profile": ..., **figures}`` to ``$RELIABILITY_FIGURES``."""
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return
    line = json.dumps({"test": test, "profile": profile(), **figures}, sort_keys=True)
    with open(target, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def run_recorded(test: str, run: Callable[[], None], figures: Callable[[], dict[str, Any]]) -> None:
    """``run()`` (a hypothesis test, say), then record ``figures()`` with ``violations`` 0 when
    it passed and 1 when it raised (hypothesis stops at the first failing case)."""
    violations = 1
    try:
        run()
        violations = 0
    finally:
        record_figures(test, **figures(), violations=violations)


# --- the world as the emulator holds it ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class QRView:
    zone: str
    name: str
    state: str
    create_time: str
    managed: bool


Snapshot = Mapping[Key, QRView]


def snapshot(emu: Emulator) -> dict[Key, QRView]:
    out: dict[Key, QRView] = {}
    for qr in emu.queued_resources():
        parts = str(qr["name"]).split("/")
        zone, name = parts[parts.index("locations") + 1], parts[-1]
        specs = (qr.get("tpu") or {}).get("nodeSpec") or [{}]
        labels = (specs[0].get("node") or {}).get("labels") or {}
        out[(zone, name)] = QRView(
            zone=zone,
            name=name,
            state=str((qr.get("state") or {}).get("state", "")),
            create_time=str(qr.get("createTime") or ""),
            managed=labels.get(MANAGED[0]) == MANAGED[1],
        )
    return out


# --- the tap in front of the emulator --------------------------------------------------------

_LOC = r"^/v2/projects/[^/]+/locations/(?P<zone>[^/]+)"
_QR_COLLECTION: Final = re.compile(_LOC + r"/queuedResources/?$")
_QR_ITEM: Final = re.compile(_LOC + r"/queuedResources/(?P<name>[^/:]+)$")
_NODE_COLLECTION: Final = re.compile(_LOC + r"/nodes/?$")

FAULT_KINDS: Final = ("429", "503", "latency", "garbage", "html")
_GARBAGE_LISTS: Final = (
    '{"queuedResources": [{"name": "projects/test-project/locations/us-cen',  # torn JSON
    '{"queuedResources": {"name": 7}, "nextPageToken": 12}',  # wrong shape
    '["not", "an", "object"]',
    '{"queuedResources": [{"name": "projects/p/locations/us-central2-b/queuedResources/x",'
    ' "state": {"state": 42}}]}',  # wrongly typed nested field
    "\x00\xff\xfe garbage",
)
HTML_PAGE: Final = (
    "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    "<body><h1>Bad Gateway</h1><p>The server encountered a temporary error.</p></body></html>"
)


def request_kind(method: str, path: str) -> tuple[str, str | None]:
    """(kind, zone): kind is list-qr, create, delete, get-qr, list-node or other."""
    if m := _QR_COLLECTION.match(path):
        return ("list-qr" if method == "GET" else "create" if method == "POST" else "other"), m[
            "zone"
        ]
    if m := _QR_ITEM.match(path):
        return ("delete" if method == "DELETE" else "get-qr" if method == "GET" else "other"), m[
            "zone"
        ]
    if m := _NODE_COLLECTION.match(path):
        return ("list-node" if method == "GET" else "other"), m["zone"]
    return "other", None


@dataclass(frozen=True, slots=True)
class Served:
    """One API request as the tap saw it (monotonic times)."""

    arrived: float
    answered: float
    method: str
    path: str
    query: Mapping[str, str]
    status: int
    kind: str
    zone: str | None
    fault: str | None  # the fault armed for this request (it may land on an identical one)
    before: Snapshot | None = None  # DELETE: the world when it arrived
    after: Snapshot | None = None  # list or DELETE: the world when it was answered

    @property
    def name(self) -> str | None:
        if self.kind == "create":
            return self.query.get("queuedResourceId")
        if self.kind in ("delete", "get-qr"):
            return self.path.rstrip("/").rsplit("/", 1)[-1]
        return None

    @property
    def key(self) -> Key | None:
        name = self.name
        return None if name is None or self.zone is None else (self.zone, name)

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300


def make_fault(kind: str, method: str, path: str, rng: random.Random) -> Fault:
    """A one-shot fault of ``kind`` for requests with exactly this method and path."""
    scope = "^" + re.escape(path) + "$"

    def fault(status: int | None, *, latency: float = 0.0, body: str | None = None) -> Fault:
        return Fault(status=status, method=method, path=scope, count=1, latency=latency, body=body)

    if kind == "429":
        return fault(429)
    if kind == "503":
        return fault(503)
    if kind == "latency":  # a slow answer: the controller may be killed while it waits
        return fault(None, latency=round(rng.uniform(0.3, 2.5), 2))
    if kind == "garbage":
        # A 2xx garbage answer to a create or delete would look accepted in the request log
        # although the emulator did nothing; garbage there comes with a 500.
        return fault(200 if method == "GET" else 500, body=rng.choice(_GARBAGE_LISTS))
    if kind == "html":
        return fault(502, body=HTML_PAGE)
    raise ValueError(f"unknown fault kind {kind!r}")


class Tap:
    """Wraps ``emu.serve_api``; undo with ``close()``. Thread-safe (handler threads call it)."""

    def __init__(
        self,
        emu: Emulator,
        rng: random.Random,
        *,
        rate: float = 0.0,
        kinds: Sequence[str] = FAULT_KINDS,
    ) -> None:
        self.emu = emu
        self.rate = rate
        self.kinds = tuple(kinds)
        self.log: list[Served] = []
        self.faults: collections.Counter[str] = collections.Counter()
        self.last_fault_at = 0.0
        self._rng = rng
        self._lock = threading.Lock()
        self._in_flight = 0
        self._hook: Callable[[Served], None] | None = None
        self._hook_fired = threading.Event()
        self._original = emu.serve_api
        emu.serve_api = self._serve  # type: ignore[method-assign]

    def close(self) -> None:
        with contextlib.suppress(AttributeError):
            del self.emu.serve_api  # the instance attribute; the class method shows again

    # -- observation ---------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def served(self, *kinds: str) -> list[Served]:
        with self._lock:
            log = list(self.log)
        return [s for s in log if not kinds or s.kind in kinds]

    def on_next_mutation(self, hook: Callable[[Served], None]) -> threading.Event:
        """Call ``hook`` (in the handler thread) right after the next create or delete was
        carried out, before its answer leaves. Returns an event set once it fired."""
        with self._lock:
            self._hook = hook
            self._hook_fired = threading.Event()
            return self._hook_fired

    def cancel_hook(self) -> None:
        with self._lock:
            self._hook = None

    # -- serving ---------------------------------------------------------------------------------
    def _serve(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        user_project: str | None = None,
    ) -> tuple[int, bytes]:
        arrived = time.monotonic()
        kind, zone = request_kind(method, path)
        fault: str | None = None
        with self._lock:
            self._in_flight += 1
            if self.rate > 0 and kind != "other" and self._rng.random() < self.rate:
                fault = self._rng.choice(self.kinds)
                self.faults[fault] += 1
                self.last_fault_at = arrived
                self.emu.inject_fault(make_fault(fault, method, path, self._rng))
        try:
            before = snapshot(self.emu) if kind == "delete" else None
            status, payload = self._original(method, path, query, raw, user_project)
            after = snapshot(self.emu) if kind in ("list-qr", "delete") else None
            served = Served(
                arrived, time.monotonic(), method, path, dict(query), status, kind, zone, fault,
                before, after,
            )  # fmt: skip
            hook: Callable[[Served], None] | None = None
            with self._lock:
                self.log.append(served)
                if fault is not None:
                    self.last_fault_at = max(self.last_fault_at, served.answered)
                if kind in ("create", "delete") and self._hook is not None:
                    hook, self._hook = self._hook, None
                fired = self._hook_fired
            if hook is not None:
                hook(served)
                fired.set()
            return status, payload
        finally:
            with self._lock:
                self._in_flight -= 1


# --- the oracle -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Oracle:
    """The intent of one desired file and the rules a controller must keep with it."""

    desired: Desired
    planted: frozenset[Key] = frozenset()

    def spec(self, key: Key) -> SlotSpec | None:
        spec = self.desired.slot(key[1])
        return spec if spec is not None and spec.zone == key[0] else None

    def group(self, spec: SlotSpec) -> RaceGroupSpec | None:
        return next((g for g in self.desired.race_groups if g.name == spec.race_group), None)

    def winners(self, group: RaceGroupSpec, snap: Snapshot) -> list[str]:
        """Won candidates ranked: ACTIVE before PROVISIONING, then oldest, then file order."""
        ranked = []
        for name in group.slots:
            spec = self.desired.slot(name)
            qr = snap.get((spec.zone, name)) if spec is not None else None
            if spec is not None and qr is not None and qr.state in WON:
                rank = (0 if qr.state == "ACTIVE" else 1, qr.create_time or "~", spec.order)
                ranked.append((rank, name))
        return [name for _, name in sorted(ranked)]

    def loser(self, spec: SlotSpec, snap: Snapshot) -> bool:
        group = self.group(spec)
        if group is None:
            return False
        won = self.winners(group, snap)
        return len(won) >= group.count and spec.name not in won[: group.count]

    def want(self, spec: SlotSpec, snap: Snapshot) -> str:
        if spec.race_group is not None:
            return "released" if self.loser(spec, snap) else "held"
        return spec.want or "held"

    def delete_refusal(self, key: Key, snaps: Iterable[Snapshot]) -> str | None:
        """None when deleting ``key`` was allowed in one of the worlds the controller may
        have decided on; else why it was not."""
        spec = self.spec(key)
        if spec is None:
            kind = "a planted unmanaged QR" if key in self.planted else "a QR not in the file"
            return f"DELETE of {key[0]}/{key[1]}: {kind}"
        if spec.race_group is None and spec.want == "released":
            return None
        states = []
        for snap in snaps:
            qr = snap.get(key)
            if qr is None or qr.state in DEAD or qr.state == "DELETING":
                return None  # dead (replace), already going, or gone: nothing held was lost
            if self.loser(spec, snap):
                return None
            states.append(qr.state)
        return f"DELETE of held slot {key[0]}/{key[1]} while {'/'.join(states) or '?'}"

    def needs(self, snap: Snapshot) -> dict[str, str]:
        """What the controller still has to do in this world: slot -> create/replace/delete."""
        out: dict[str, str] = {}
        for spec in self.desired.slots:
            qr = snap.get((spec.zone, spec.name))
            if self.want(spec, snap) == "held":
                if qr is None:
                    out[spec.name] = "create"
                elif qr.state in DEAD:
                    out[spec.name] = "replace"
            elif qr is not None and qr.state != "DELETING":
                out[spec.name] = "delete"
        return out

    def strays(self, snap: Snapshot) -> list[str]:
        """QRs that are neither slots of the file nor planted by the test."""
        return [
            f"{z}/{n}"
            for (z, n) in snap
            if self.spec((z, n)) is None and (z, n) not in self.planted
        ]

    def unconverged(self, snap: Snapshot) -> list[str]:
        """Empty when the world is exactly what the file wants, every held slot ACTIVE."""
        problems = []
        for spec in self.desired.slots:
            qr = snap.get((spec.zone, spec.name))
            state = qr.state if qr else "absent"
            if spec.race_group is None:
                want = spec.want or "held"
                if want == "held" and state != "ACTIVE":
                    problems.append(f"{spec.name} held but {state}")
                if want == "released" and qr is not None:
                    problems.append(f"{spec.name} released but {state}")
        for group in self.desired.race_groups:
            kept = self.winners(group, snap)[: group.count]
            active = [n for n in kept if self._state(n, snap) == "ACTIVE"]
            if len(active) < group.count:
                problems.append(f"race {group.name}: {len(active)}/{group.count} ACTIVE")
            for name in group.slots:
                if name not in kept and self._state(name, snap) != "absent":
                    problems.append(f"race {group.name}: loser {name} {self._state(name, snap)}")
        problems += [f"planted {z}/{n} gone" for z, n in sorted(self.planted) if (z, n) not in snap]
        problems += [f"stray {s}" for s in self.strays(snap)]
        return problems

    def _state(self, name: str, snap: Snapshot) -> str:
        spec = self.desired.slot(name)
        qr = snap.get((spec.zone, name)) if spec is not None else None
        return qr.state if qr is not None else "absent"

    # -- rules over a request log -----------------------------------------------------------
    def audit(self, log: Sequence[Served], window: int = 4) -> list[str]:
        """Safety violations in a request log:

        - a create for anything but a slot of the file;
        - a DELETE that ``delete_refusal`` refuses in the world when it arrived *and* in the
          worlds of the last ``window`` queued-resource lists answered before it;
        - a second accepted create of a QR with no accepted delete carried out since the first
          (in the order the emulator carried them out: a slow DELETE counts when answered).
        """
        problems: list[str] = []
        lists: collections.deque[Snapshot] = collections.deque(maxlen=window)
        observed = sorted((s for s in log if s.kind == "list-qr" and s.after), key=_answered)
        li = 0
        for s in sorted(log, key=lambda s: s.arrived):
            while li < len(observed) and observed[li].answered <= s.arrived:
                lists.append(observed[li].after or {})
                li += 1
            key = s.key
            if key is None:
                continue
            if s.kind == "create" and self.spec(key) is None:
                problems.append(f"create of {key[0]}/{key[1]}, which is not a slot of the file")
            elif s.kind == "delete":
                refusal = self.delete_refusal(key, [*([s.before] if s.before else []), *lists])
                if refusal is not None:
                    problems.append(refusal)
        alive: dict[Key, bool] = {k: True for k in self.planted}
        history: dict[Key, list[str]] = collections.defaultdict(list)
        t0 = min((s.arrived for s in log), default=0.0)
        for s in sorted(log, key=_answered):
            key = s.key
            if key is None or s.kind not in ("create", "delete"):
                continue
            history[key].append(
                f"{s.method} {s.status}{'/' + s.fault if s.fault else ''}"
                f"@{s.arrived - t0:.2f}-{s.answered - t0:.2f}s"
            )
            if s.accepted and s.kind == "create":
                if alive.get(key):
                    problems.append(
                        f"second accepted create of {key[0]}/{key[1]} without an accepted "
                        f"delete between: {', '.join(history[key][-6:])}"
                    )
                alive[key] = True
            elif s.accepted:
                alive[key] = False
        return problems


def _answered(s: Served) -> float:
    return s.answered


def stale_deletes(log: Sequence[Served]) -> list[str]:
    """DELETEs carried out on a newer incarnation than the one there when they arrived: a slow
    DELETE from a killed controller meeting the QR its successor re-created. The API has no
    precondition to prevent it; the count is reported, the arrival world is what is judged."""
    out = []
    for s in log:
        key = s.key
        if s.kind != "delete" or key is None or not s.before or not s.after:
            continue
        was, hit = s.before.get(key), s.after.get(key)
        if was is not None and hit is not None and was.create_time != hit.create_time:
            out.append(f"{key[0]}/{key[1]}: {was.state}@{was.create_time} -> {hit.create_time}")
    return out


# --- the controller as a process -----------------------------------------------------------


def controller_env(emu: Emulator, directory: Path) -> dict[str, str]:
    """``os.environ`` pointed at ``emu`` (REST and gcloud alike), with a throwaway token."""
    token = directory / "token"
    token.write_text("reliability-token\n")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "TPU_RECONCILER_"))
    }
    (directory / "gcloud").mkdir(exist_ok=True)
    env.update(emu.gcloud_env(str(directory / "gcloud"), str(token), "test-project"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    return env


class ControllerProcess:
    """``python -m reconciler -f DESIRED --state-dir STATE run`` in its own session."""

    def __init__(self, desired: Path, state: Path, env: Mapping[str, str], log: Path) -> None:
        self.desired, self.state, self.env, self.log = desired, state, dict(env), log
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        argv = [*CLI_ARGV, "-f", str(self.desired)]
        argv += ["--state-dir", str(self.state), "run"]
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                argv,
                env=self.env,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        self.starts += 1

    def signal_kill(self) -> None:
        """SIGKILL now (safe from any thread); ``kill9`` also waits."""
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)

    def kill9(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.signal_kill()
            self.kills += 1
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; a controller that does not stop in time is killed and fails."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(
                f"controller did not stop within {timeout:g}s of SIGTERM"
            ) from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# --- threads that watch while the test runs ----------------------------------------------------


class BackgroundLoop:
    """``tick()`` every ``interval`` seconds in a daemon thread, between ``with`` and its end."""

    interval = 0.02

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=type(self).__name__)

    def tick(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()


# --- status.json, read the way a user's tools read it ---------------------------------------


class StatusWatcher(BackgroundLoop):
    """Re-reads ``path`` in a loop. ``bad`` lists reads that were not complete JSON objects;
    ``until[slot]`` is the latest ``plan.deferred[].until`` seen for a slot, ``latest_until``
    the latest of all (epoch seconds)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.reads = 0
        self.bad: list[str] = []
        self.observe_errors = 0
        self.last_observe_error = ""
        self.latest_until = 0.0
        self.until: dict[str, float] = {}
        self._last = b""

    def tick(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        self.reads += 1
        if raw == self._last:
            return
        self._last = raw
        try:
            doc = json.loads(raw)
        except ValueError as e:
            self.bad.append(f"{e}: {raw[-80:]!r}")
            return
        if not isinstance(doc, dict) or "schema_version" not in doc:
            self.bad.append(f"not a status document: {raw[:80]!r}")
            return
        if doc.get("observe_error"):
            self.observe_errors += 1
            self.last_observe_error = str(doc["observe_error"])
        for held in (doc.get("plan") or {}).get("deferred") or []:
            until = held.get("until")
            if isinstance(until, str):  # whole seconds, cut: the end of that second
                moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
                end = moment.timestamp() + 1.0
                self.latest_until = max(self.latest_until, end)
                slot = str(held.get("slot"))
                self.until[slot] = max(self.until.get(slot, 0.0), end)


def torn_lines(path: Path) -> int:
    """Lines of the event log (rotations included) that are not a JSON object."""
    count = 0
    for p in log_files(path):
        with contextlib.suppress(FileNotFoundError):
            for raw in p.read_bytes().splitlines():
                try:
                    ok = isinstance(json.loads(raw), dict)
                except ValueError:
                    ok = False
                count += not ok
    return count


def file_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777
