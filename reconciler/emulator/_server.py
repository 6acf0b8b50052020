"""The ``Emulator``: the emulated world behind an HTTP server in a background thread.

Side effects live here and in ``_http`` (the socket and handler threads): the wall
clock that drives emulated time (``speed`` emulated seconds per real second, plus whatever
``advance`` adds), latency sleeps, and the request log. One lock serializes the world between
the HTTP threads and test code; latency is slept outside it.
"""

from __future__ import annotations

import collections
import json
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from reconciler.emulator import _api, _compute_api
from reconciler.emulator import _records as rec
from reconciler.emulator._compute_control import ComputeControls
from reconciler.emulator._control import handle as handle_control
from reconciler.emulator._http import EmulatorHTTPServer
from reconciler.emulator._records import ApiError
from reconciler.emulator._scenario import Fault, OperationFailure, Scenario, ScenarioQueuedResource
from reconciler.emulator._world import DEFAULT_IP_POOL, World

#: The gcloud account of ``gcloud_env`` (example.com: a name no one owns, RFC 2606).
EMULATED_ACCOUNT = "demo-user@example.com"
#: The request log keeps the newest this many requests (a long demo must not grow forever).
LOG_LIMIT = 100_000
#: The longest a Compute Engine ``operations.wait`` blocks (real seconds; Google's is about
#: two minutes, and it may answer sooner with the operation not yet DONE) [V].
WAIT_LIMIT = 2.0


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One API request as served (control requests under ``/_emulator/`` are not logged)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int
    at: float  # emulated seconds since start
    user_project: str | None = None  # the X-Goog-User-Project header, when sent
    #: the JSON answered, when the emulator was made with ``record_responses=True``
    response: Any = None

    @property
    def key(self) -> str:
        """``"POST queuedResources.create"``, ``"POST compute.instances.insert"``: the
        ``request_counts`` key of this request."""
        return _compute_api.classify(self.method, self.path) or _api.classify(
            self.method, self.path
        )


class Emulator:
    """A local Cloud TPU v2 API and Compute Engine v1 API. ``with Emulator() as emu:``
    starts and stops it.

    ``speed`` (default: the scenario's, else 1.0) is emulated seconds per real second; 0
    freezes the clock so that only ``advance`` moves it. ``page_size`` (default 25) is the
    TPU list page size when the client does not ask for one. ``ip_pool`` hands out external
    IPs, one per TPU worker and per Compute Engine address, lowest free first. ``project``
    names resources in control-API output. ``record_responses`` keeps each answer's JSON in
    the request log (``RequestRecord.response``), for tests that decode them.
    ``emu.compute`` holds the Compute Engine controls (``ComputeControls``).
    """

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        speed: float | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        ip_pool: Sequence[str] | None = None,
        page_size: int | None = None,
        project: str = "test-project",
        record_responses: bool = False,
    ) -> None:
        scenario = scenario or Scenario()
        self.scenario = scenario
        if speed is None:
            speed = scenario.speed if scenario.speed is not None else 1.0
        self.speed = float(speed)
        if self.speed < 0:
            raise ValueError("speed must be >= 0")
        pool = tuple(ip_pool or scenario.ip_pool or DEFAULT_IP_POOL)
        if not pool:
            raise ValueError("ip_pool must not be empty")
        self.page_size = int(page_size or scenario.page_size or 25)
        self.project = project
        self.host = host
        self._port = port
        self._lock = threading.RLock()
        self._world = World(scenario, epoch=time.time(), ip_pool=pool, user=EMULATED_ACCOUNT)
        self.record_responses = record_responses
        self.compute = ComputeControls(self._run_compute, project)
        self._t0 = time.monotonic()
        self._offset = 0.0
        self._log: collections.deque[RequestRecord] = collections.deque(maxlen=LOG_LIMIT)
        self._httpd: EmulatorHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Emulator:
        if self._httpd is not None:
            return self
        httpd = EmulatorHTTPServer((self.host, self._port), self)
        self._httpd = httpd
        self._port = httpd.server_address[1]
        with self._lock:
            self._t0 = time.monotonic()
            self._world.clock.anchor(self._offset, time.time(), self.speed)
            self._world.settle(self.now())
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name=f"tpu-emulator-{self._port}",
        )  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.closed = True
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """The value for ``CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU`` (and ``..._OSLOGIN``,
        ``..._CLOUDQUOTAS``, ``..._COMPUTE``: gcloud appends ``compute/v1/`` to a bare
        override)."""
        return f"http://{self.host}:{self._port}/"

    @property
    def compute_url(self) -> str:
        """The Compute Engine API's root here, ``http://HOST:PORT/compute/v1/``: what
        ``https://compute.googleapis.com/compute/v1/`` is to the real one."""
        return f"{self.url}compute/v1/"

    def gcloud_env(
        self, config_dir: str, token_file: str, project: str | None = None
    ) -> dict[str, str]:
        """The variables that point gcloud at this emulator (merge them into a copy of environ).

        Besides the four APIs served here (Cloud TPU, Compute Engine, OS Login, and Cloud
        Quotas for ``settings.quota_source: cloud``), they keep gcloud and the controller off every
        other address it would dial unasked: the GCE metadata server (asked for the universe
        domain and for the metrics environment), update checks and usage reports. The
        account only names the OS Login user in the request path; the token file
        authenticates.
        """
        return {
            "CLOUDSDK_CONFIG": config_dir,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": self.url,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": self.url,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": self.url,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS": self.url,
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": token_file,
            "CLOUDSDK_CORE_ACCOUNT": EMULATED_ACCOUNT,
            "CLOUDSDK_CORE_PROJECT": project or self.project,
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_CORE_CHECK_GCE_METADATA": "false",
            "CLOUDSDK_METRICS_ENVIRONMENT": "tpu-emulator",
            "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
        }

    # --- the clock ---------------------------------------------------------------------------
    # Emulated time drives transitions; the times the API reports are wall-clock times (the
    # world's ``Clock`` maps one onto the other, anchored here at start, at every speed change
    # and at every jump), so a fast clock never stamps a time ahead of the wall clock.

    def now(self) -> float:
        """Emulated seconds since start."""
        return self._offset + (time.monotonic() - self._t0) * self.speed

    def advance(self, seconds: float) -> None:
        """Move emulated time forward by ``seconds`` now, running everything due."""
        if seconds < 0:
            raise ValueError("cannot move the clock backwards")
        with self._lock:
            now, wall = self.now(), time.time()
            self._world.settle(now)  # what came before the jump keeps its own wall time
            self._world.clock.anchor(now, wall, 0.0)  # what the jump passes comes now
            self._offset += seconds
            self._world.clock.anchor(now + seconds, wall, self.speed)
            self._world.settle(self.now())

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        with self._lock:
            self._world.settle(self.now())
            self._offset = self.now()
            self._t0 = time.monotonic()
            self.speed = float(speed)
            self._world.clock.anchor(self._offset, time.time(), self.speed)

    def _settled(self) -> World:
        """The world settled to now; call with the lock held."""
        self._world.settle(self.now())
        return self._world

    def _run_compute(self, action: Any) -> Any:
        """Run a Compute Engine control on the settled world, under the lock."""
        with self._lock:
            world = self._settled()
            result = action(world.compute)
            world.compute.tend()
            world.settle(world.t)
            return result

    # --- control -----------------------------------------------------------------------------

    def set_capacity(
        self, zone: str, accelerator: str, count: int | None, *, shortage: str | None = None
    ) -> None:
        """At most ``count`` (None: unlimited) slices of this type hold capacity in ``zone``;
        ``shortage`` "wait" or "fail" says what a QR does when none is free."""
        if shortage not in (None, "wait", "fail"):
            raise ValueError("shortage must be 'wait' or 'fail'")
        with self._lock:
            self._settled().set_capacity(zone, accelerator, count, shortage)
            self._world.settle(self._world.t)

    def set_quota(
        self,
        family: str,
        mode: str,
        chips: int | None,
        *,
        zone: str | None = None,
        region: str | None = None,
    ) -> None:
        """At most ``chips`` chips of ``family`` in ``mode`` queued or held at once in ``zone``
        or ``region`` (None: no limit); creates past it are refused 429 as the cloud does."""
        if (zone is None) == (region is None):
            raise ValueError("give exactly one of zone and region")
        scope, place = ("zone", zone) if zone is not None else ("region", region)
        assert place is not None
        with self._lock:
            self._settled().quotas.set(family, mode, scope, place, chips)

    def capacity_used(self, zone: str, accelerator: str) -> int:
        with self._lock:
            return self._settled().used(zone, accelerator)

    def preempt(self, zone: str, node: str) -> None:
        """Node -> PREEMPTED, its QR -> SUSPENDING -> SUSPENDED (stateInitiator SERVICE)."""
        with self._lock:
            self._control(lambda w: w.preempt(zone, node))

    def fail_queued_resource(
        self, zone: str, name: str, status: str = "RESOURCE_EXHAUSTED", message: str = ""
    ) -> None:
        """QR -> FAILED with ``failedData.error`` (code 7 PERMISSION_DENIED for a closed queue)."""
        with self._lock:
            self._control(lambda w: w.fail(zone, name, status, message or f"{status} (emulator)"))

    def inject_fault(self, fault: Fault) -> None:
        with self._lock:
            self._world.faults.add(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._world.faults.clear()

    def set_latency(self, seconds: float) -> None:
        """Real seconds slept before answering every API request."""
        with self._lock:
            self._world.latency = max(0.0, float(seconds))

    def fail_deletes_while_provisioning(self, enabled: bool = True) -> None:
        """Deletes of a PROVISIONING QR return an operation that later fails (code 9)."""
        with self._lock:
            self._world.fail_provisioning_deletes = enabled

    def fail_operations(self, **fields: Any) -> None:
        """Arm an ``OperationFailure`` (see the scenario): matching creates or deletes get an
        operation that finishes later with that error."""
        failure = OperationFailure(**fields)
        with self._lock:
            self._world.add_op_failure(failure)

    def set_unreachable(self, zone: str, unreachable: bool = True) -> None:
        """Hide ``zone`` from ``locations/-`` lists (``unreachable[]``); direct calls get 503."""
        with self._lock:
            (self._world.unreachable.add if unreachable else self._world.unreachable.discard)(zone)

    def add_queued_resource(
        self,
        zone: str,
        name: str,
        accelerator: str = "v4-8",
        *,
        runtime_version: str = "tpu-ubuntu2204-base",
        mode: str = "spot",
        labels: dict[str, str] | None = None,
        node_id: str | None = None,
        state: str | None = None,
        valid_until: float | None = None,
        slices: int = 1,
        max_run_duration: float | None = None,
    ) -> dict[str, Any]:
        """Put a QR in place without the API (e.g. an unmanaged one without our label;
        ``slices`` > 1: a multislice QR, nodes ``<node_id or name>-0`` ...).

        ``state`` None starts it CREATING like a created one; ACTIVE / PROVISIONING /
        SUSPENDED give it a node (and a capacity unit, even beyond the limit); FAILED fails it
        with code 8. Returns the QR's API JSON.
        """
        spec = ScenarioQueuedResource.model_validate(
            {
                "name": name, "zone": zone, "accelerator": accelerator,
                "runtime_version": runtime_version, "mode": mode, "labels": labels or {},
                "node_id": node_id, "state": state, "valid_until": valid_until,
                "slices": slices,
                "max_run_duration": max_run_duration,
            }
        )  # fmt: skip
        with self._lock:
            world = self._settled()
            if (zone, name) in world.qrs:
                raise ValueError(f"queued resource {zone}/{name} already exists")
            q = world.place(spec)
            world.settle(world.t)
            return rec.render_qr(q, self.project, world.clock)

    def end_run(self, zone: str, name: str) -> None:
        """End a flex-start (or any running) QR's run now: its VMs deleted, QR -> SUSPENDED."""
        with self._lock:
            self._control(lambda w: w.end_run(w.get(zone, name)))

    def reject_flex_start(
        self, zone: str, accelerator: str | None = None, rejected: bool = True
    ) -> None:
        """Refuse flex-start creates in ``zone`` (for ``accelerator``, else for every type)
        with the cloud's INVALID_ARGUMENT message."""
        with self._lock:
            key = (zone, accelerator)
            (self._world.flex_rejections.add if rejected else self._world.flex_rejections.discard)(
                key
            )

    def set_node_health(self, zone: str, node: str, **fields: Any) -> None:
        """A node's ``health``, ``symptoms`` (list of Symptom JSON) and ``maintenance`` (an
        UpcomingMaintenance JSON); a key left out stays, null clears it."""
        unknown = set(fields) - {"health", "symptoms", "maintenance"}
        if unknown:
            raise ValueError(f"unknown node health field(s): {', '.join(sorted(unknown))}")
        with self._lock:
            self._control(lambda w: w.set_node_health(zone, node, fields))

    def set_guest_attribute(
        self,
        zone: str,
        node: str,
        key: str,
        value: str,
        *,
        worker: int | None = None,
        namespace: str = "tpu-reconciler",
    ) -> None:
        """Write a node's guest attribute ``namespace/key`` as its worker's VM would (every
        worker's when ``worker`` is None; an empty value removes it): what a boot script
        reports, read back through ``nodes.getGuestAttributes``."""
        with self._lock:
            self._control(
                lambda w: w.set_guest_attribute(zone, node, worker, namespace, key, value)
            )

    def _control(self, action: Any) -> None:
        world = self._settled()
        try:
            action(world)
        except ApiError as exc:
            if exc.status == "NOT_FOUND":
                raise LookupError(exc.message) from None
            raise ValueError(exc.message) from None
        world.settle(world.t)

    # --- inspection --------------------------------------------------------------------------

    def queued_resource(self, zone: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            world = self._settled()
            q = world.qrs.get((zone, name))
            return None if q is None else rec.render_qr(q, self.project, world.clock)

    def node(self, zone: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            world = self._settled()
            n = world.nodes.get((zone, name))
            if n is None:
                return None
            return rec.render_node(n, world.qrs[(zone, n.qr_name)], self.project, world.clock)

    def queued_resources(self) -> list[dict[str, Any]]:
        with self._lock:
            world = self._settled()
            return [
                rec.render_qr(q, self.project, world.clock) for _, q in sorted(world.qrs.items())
            ]

    def nodes(self) -> list[dict[str, Any]]:
        with self._lock:
            world = self._settled()
            return [
                rec.render_node(n, world.qrs[(n.zone, n.qr_name)], self.project, world.clock)
                for _, n in sorted(world.nodes.items())
            ]

    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._log)

    def request_counts(self) -> collections.Counter[str]:
        with self._lock:
            return collections.Counter(r.key for r in self._log)

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    # --- serving -----------------------------------------------------------------------------

    def serve_control(self, method: str, path: str, raw: bytes) -> tuple[int, bytes]:
        """Answer one ``/_emulator/`` control request (called from handler threads)."""
        return handle_control(self, method, path, raw)

    def serve_api(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        user_project: str | None = None,
    ) -> tuple[int, bytes]:
        """Answer one API request (called from handler threads). ``user_project``: the
        request's ``X-Goog-User-Project`` header, kept in the request log."""
        with self._lock:
            fault = self._settled().faults.take(method, path)
            delay = self._world.latency + (fault.latency if fault else 0.0)
        if delay > 0:
            time.sleep(delay)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        compute = path.startswith(_compute_api.ROOT)
        if compute and (fault is None or fault.http_status is None):
            waited = _compute_api.waited_operation(method, path)
            if waited is not None:
                self._wait_for(waited)
        with self._lock:
            world = self._settled()
            obj: Any = None
            if fault is not None and fault.http_status is not None:
                status, payload = fault.http_status, _fault_body(fault, compute)
                if self.record_responses and payload[:1] == b"{":
                    try:
                        obj = json.loads(payload)
                    except ValueError:
                        obj = payload.decode("utf-8", "replace")
            elif isinstance(body, str):
                err = ApiError("INVALID_ARGUMENT", "the request body is not JSON")
                status, obj = err.http_status, err.body()
                if compute:
                    obj = _compute_api.error_body(
                        400, "parseError", "Invalid JSON payload received."
                    )
                payload = _dump(obj)
            else:
                try:
                    if compute:
                        status, obj = _compute_api.dispatch(
                            world.compute, method, path, query, body
                        )
                    else:
                        status, obj = _api.dispatch(
                            world, method, path, query, body, self.page_size
                        )
                except Exception as exc:  # an emulator bug: answer like Google, keep serving
                    traceback.print_exc()
                    message = f"emulator error: {exc!r}"
                    status, obj = 500, ApiError("INTERNAL", message).body()
                    if compute:
                        obj = _compute_api.error_body(500, "backendError", message)
                payload = _dump(obj)
            kept = obj if self.record_responses else None
            self._log.append(
                RequestRecord(method, path, dict(query), body, status, world.t, user_project, kept)
            )
        return status, payload

    def _wait_for(self, key: tuple[str, str]) -> None:
        """Block (outside the lock) until the operation is DONE, for at most ``WAIT_LIMIT``
        real and 120 emulated seconds; at once when the clock stands still, since nothing
        but this thread could move it."""
        deadline = time.monotonic() + WAIT_LIMIT
        with self._lock:
            started = self.now()
        while True:
            with self._lock:
                world = self._settled()
                op = world.compute.ops.get(key)
                if op is None or op.ended is not None or self.speed == 0:
                    return
                if self.now() - started >= 120 or time.monotonic() >= deadline:
                    return
            time.sleep(0.01)


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, indent=1).encode()


def _fault_body(fault: Fault, compute: bool = False) -> bytes:
    if fault.body is not None:
        return fault.body.encode() if isinstance(fault.body, str) else fault.body
    status = fault.status_name or "UNKNOWN"
    message = f"{status}: injected by the emulator"
    if compute:  # Compute Engine's envelope names a reason per error
        code = fault.http_status or 500
        return _dump(_compute_api.error_body(code, _compute_api.reason_for(code), message))
    return _dump({"error": {"code": fault.http_status, "message": message, "status": status}})
