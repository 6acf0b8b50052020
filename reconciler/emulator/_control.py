"""The emulator's control API under ``/_emulator/``: the test controls, as JSON over HTTP.

Maps each request onto one public ``Emulator`` method, so a test or a demo can drive an
emulator running in another process (``tpu-reconciler emulator serve``). No state of its
own; errors come back in Google's error shape with HTTP 400 / 404.

    GET    /_emulator/state                       clock, QRs, nodes, capacity, faults
    POST   /_emulator/capacity    {zone, accelerator, count, shortage?}
    POST   /_emulator/quotas      {family, mode, zone | region, chips}   (chips null: no limit)
    POST   /_emulator/preempt     {zone, node}
    POST   /_emulator/fail        {zone, name, status?, message?}
    POST   /_emulator/faults      {status?, method?, path?, count?, latency?, body?}
    DELETE /_emulator/faults
    POST   /_emulator/latency     {seconds}
    POST   /_emulator/fail-deletes-while-provisioning   {enabled}
    POST   /_emulator/operation-failures  {verb?, zone?, name?, status?, message?, after?, count?}
    POST   /_emulator/unreachable {zone, unreachable?}
    POST   /_emulator/advance     {seconds}
    POST   /_emulator/speed       {speed}
    POST   /_emulator/queued-resources   {zone, name, accelerator?, mode?, labels?, state?, ...}
    POST   /_emulator/end-run     {zone, name}      a flex-start run ends now
    POST   /_emulator/flex-rejection {zone, accelerator?, rejected?}
    POST   /_emulator/node-health {zone, node, health?, symptoms?, maintenance?}
    POST   /_emulator/guest-attributes {zone, node, key, value, worker?, namespace?}
    GET    /_emulator/requests                    {"requests": [...], "counts": {...}}
    DELETE /_emulator/requests
    *      /_emulator/compute/...                 the Compute Engine controls
                                                  (``_compute_control``)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from pydantic import ValidationError

from reconciler.emulator import _compute_control
from reconciler.emulator._compute_control import ComputeControls
from reconciler.emulator._scenario import Fault


class Emulator(Protocol):
    """The public ``Emulator`` methods the control API maps onto (``_server`` implements it;
    this module does not import it, so the two stay out of a circle)."""

    @property
    def speed(self) -> float: ...
    @property
    def compute(self) -> ComputeControls: ...
    @property
    def url(self) -> str: ...
    def now(self) -> float: ...
    def queued_resources(self) -> list[dict[str, Any]]: ...
    def nodes(self) -> list[dict[str, Any]]: ...
    def requests(self) -> Sequence[Any]: ...
    def request_counts(self) -> Mapping[str, int]: ...
    def inject_fault(self, fault: Fault) -> None: ...
    def set_capacity(
        self, zone: str, accelerator: str, count: int | None, *, shortage: str | None = None
    ) -> None: ...
    def set_quota(
        self,
        family: str,
        mode: str,
        chips: int | None,
        *,
        zone: str | None = ...,
        region: str | None = ...,
    ) -> None: ...
    def fail_queued_resource(
        self, zone: str, name: str, status: str = ..., message: str = ...
    ) -> None: ...
    def add_queued_resource(self, zone: str, name: str, accelerator: str = ...) -> Any: ...
    def preempt(self, zone: str, node: str) -> None: ...
    def clear_faults(self) -> None: ...
    def set_latency(self, seconds: float) -> None: ...
    def fail_deletes_while_provisioning(self, enabled: bool = ...) -> None: ...
    def fail_operations(self, **fields: Any) -> None: ...
    def set_unreachable(self, zone: str, unreachable: bool = ...) -> None: ...
    def advance(self, seconds: float) -> None: ...
    def set_speed(self, speed: float) -> None: ...
    def clear_requests(self) -> None: ...
    def end_run(self, zone: str, name: str) -> None: ...
    def reject_flex_start(
        self, zone: str, accelerator: str | None = ..., rejected: bool = ...
    ) -> None: ...
    def set_node_health(self, zone: str, node: str, **fields: Any) -> None: ...
    def set_guest_attribute(
        self,
        zone: str,
        node: str,
        key: str,
        value: str,
        *,
        worker: int | None = ...,
        namespace: str = ...,
    ) -> None: ...


_Action = Callable[[Emulator, dict[str, Any]], Any]


def _state(emu: Emulator, _: dict[str, Any]) -> Any:
    return {
        "now": emu.now(),
        "speed": emu.speed,
        "url": emu.url,
        "queuedResources": emu.queued_resources(),
        "nodes": emu.nodes(),
    }


def _requests(emu: Emulator, _: dict[str, Any]) -> Any:
    records = [asdict(r) for r in emu.requests()]
    return {"requests": records, "counts": dict(emu.request_counts())}


def _fault(emu: Emulator, a: dict[str, Any]) -> Any:
    fields = {k: a[k] for k in ("status", "method", "path", "count", "latency", "body") if k in a}
    emu.inject_fault(Fault(**fields))


def _capacity(emu: Emulator, a: dict[str, Any]) -> Any:
    emu.set_capacity(a["zone"], a["accelerator"], a.get("count"), shortage=a.get("shortage"))


def _fail(emu: Emulator, a: dict[str, Any]) -> Any:
    emu.fail_queued_resource(
        a["zone"], a["name"], a.get("status", "RESOURCE_EXHAUSTED"), a.get("message", "")
    )


def _add(emu: Emulator, a: dict[str, Any]) -> Any:
    zone, name = a.pop("zone"), a.pop("name")
    add: Callable[..., Any] = emu.add_queued_resource  # the JSON fields are its keywords
    return add(zone, name, **a)


def _guest(emu: Emulator, a: dict[str, Any]) -> Any:
    worker = a.get("worker")
    emu.set_guest_attribute(
        a["zone"],
        a["node"],
        str(a["key"]),
        str(a["value"]),
        worker=None if worker is None else int(worker),
        namespace=str(a.get("namespace", "tpu-reconciler")),
    )


ROUTES: dict[tuple[str, str], _Action] = {
    ("GET", "state"): _state,
    ("POST", "capacity"): _capacity,
    ("POST", "quotas"): lambda e, a: e.set_quota(
        a["family"], a["mode"], a["chips"], zone=a.get("zone"), region=a.get("region")
    ),
    ("POST", "preempt"): lambda e, a: e.preempt(a["zone"], a["node"]),
    ("POST", "fail"): _fail,
    ("POST", "faults"): _fault,
    ("DELETE", "faults"): lambda e, a: e.clear_faults(),
    ("POST", "latency"): lambda e, a: e.set_latency(float(a["seconds"])),
    ("POST", "fail-deletes-while-provisioning"): lambda e, a: e.fail_deletes_while_provisioning(
        bool(a.get("enabled", True))
    ),
    ("POST", "operation-failures"): lambda e, a: e.fail_operations(**a),
    ("POST", "unreachable"): lambda e, a: e.set_unreachable(
        a["zone"], bool(a.get("unreachable", True))
    ),
    ("POST", "advance"): lambda e, a: e.advance(float(a["seconds"])),
    ("POST", "speed"): lambda e, a: e.set_speed(float(a["speed"])),
    ("POST", "queued-resources"): _add,
    ("POST", "end-run"): lambda e, a: e.end_run(a["zone"], a["name"]),
    ("POST", "flex-rejection"): lambda e, a: e.reject_flex_start(
        a["zone"], a.get("accelerator"), bool(a.get("rejected", True))
    ),
    ("POST", "node-health"): lambda e, a: e.set_node_health(a.pop("zone"), a.pop("node"), **a),
    ("POST", "guest-attributes"): _guest,
    ("GET", "requests"): _requests,
    ("DELETE", "requests"): lambda e, a: e.clear_requests(),
}


def _route(method: str, path: str) -> _Action | None:
    name = path.removeprefix("/_emulator/").strip("/")
    if name.startswith("compute/"):
        compute = _compute_control.ROUTES.get((method, name.removeprefix("compute/")))
        return None if compute is None else (lambda e, a: compute(e.compute, a))
    return ROUTES.get((method, name))


def handle(emu: Emulator, method: str, path: str, raw: bytes) -> tuple[int, bytes]:
    action = _route(method, path)
    if action is None:
        return _error(404, "NOT_FOUND", f"no control endpoint {method} {path}")
    try:
        args = json.loads(raw) if raw else {}
        if not isinstance(args, dict):
            raise TypeError("the body must be a JSON object")
        result = action(emu, args)
    except KeyError as exc:
        return _error(400, "INVALID_ARGUMENT", f"missing field {exc}")
    except LookupError as exc:
        return _error(404, "NOT_FOUND", str(exc))
    except (ValueError, TypeError, ValidationError) as exc:
        return _error(400, "INVALID_ARGUMENT", str(exc))
    out = result if result is not None else {"ok": True}
    return 200, json.dumps(out, default=_jsonable).encode()


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _error(code: int, status: str, message: str) -> tuple[int, bytes]:
    return code, json.dumps(
        {"error": {"code": code, "message": message, "status": status}}
    ).encode()
