"""The controller's Prometheus metrics: a private registry, fed as the controller works, and
the ``/metrics`` endpoint that serves it while ``settings.metrics`` names an address.

What is counted and with which labels is ``core.metrics`` (pure); this module holds the
lifetime: the ``CollectorRegistry`` (one per controller, never the process-global one), the
counters and histograms it updates from event records (it listens to the ``EventLog``) and from
the controller's hooks (a pass, an observation, workload attempts), the gauges it computes at
scrape time from the last status snapshot, and the HTTP server thread — started, moved or
stopped when the desired file's ``settings.metrics`` changes, stopped by ``close``.

May: serve HTTP on the configured address (at most ``MAX_CONNECTIONS`` at once, each given
``READ_TIMEOUT`` to ask), emit ``metrics.serving`` / ``metrics.failed`` events. May not: act
on the cloud, or let a metrics failure reach the controller's pass.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from socketserver import ThreadingMixIn
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from reconciler.core import memory as mem
from reconciler.core import metrics as m
from reconciler.model.desired import Desired
from reconciler.model.metrics_address import MetricsAddress, parse_metrics_address
from reconciler.model.status import StatusSnapshot
from reconciler.runtime.backends import STATE_WORDS, word_state
from reconciler.runtime.events import EventLog
from reconciler.runtime.workloads import ended_attempts

log = logging.getLogger(__name__)

_BUCKETS: Mapping[str, tuple[float, ...]] = {
    "reconcile_time_seconds": m.PASS_BUCKETS,
    "observe_duration_seconds": m.OBSERVE_BUCKETS,
    "observe_requests": m.REQUEST_BUCKETS,
    "queue_wait_seconds": m.WAIT_BUCKETS,
    "race_duration_seconds": m.WAIT_BUCKETS,
}
#: Counters whose every label set is known up front: exported at 0 from the start.
_PRESET: Mapping[str, list[tuple[str, ...]]] = {
    "reconcile": [(r,) for r in m.RESULTS],
    "actions": [(k, o) for k in m.LABEL_VALUES["kind"] for o in m.OUTCOMES],
    "errors": [(s, r) for s in m.SOURCES for r in m.RETRY],
    "workload_restarts": [(c,) for c in m.CAUSES],
}

#: The gauges read from the status snapshot when scraped.
_GAUGES = ("slots", "chips_held", "workloads", "in_flight_actions", "desired_valid")


class _SnapshotGauges(Collector):
    """The gauges, computed from the last snapshot when scraped (``core.metrics.gauges``)."""

    def __init__(self, owner: Metrics) -> None:
        self.owner = owner
        # the last snapshot and its gauges: a scrape between two passes computes nothing
        self._last: tuple[StatusSnapshot, m.Gauges] | None = None

    def describe(self) -> list[Metric]:
        return [self._family(n) for n in _GAUGES]

    def _family(self, short: str) -> GaugeMetricFamily:
        spec = m.SPEC[short]
        return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels or None)

    def collect(self) -> Iterator[Metric]:
        snapshot = self.owner.snapshot
        if snapshot is None:
            return
        last = self._last
        if last is not None and last[0] is snapshot:
            g = last[1]
        else:
            g = m.gauges(snapshot, self.owner.state_words)
            self._last = (snapshot, g)
        labelled = {"slots": g.slots, "chips_held": g.chips_held, "workloads": g.workloads}
        for short, values in labelled.items():
            family = self._family(short)
            for labels, value in sorted(values.items()):
                family.add_metric(list(labels), value)
            yield family
        for short, value in {
            "in_flight_actions": g.in_flight,
            "desired_valid": g.desired_valid,
        }.items():
            family = self._family(short)
            family.add_metric([], value)
            yield family


#: Connections served at once; one more is closed at once (a scrape is one short request).
MAX_CONNECTIONS: Final = 16
#: Seconds a connection may take to send its request (and to take the answer).
READ_TIMEOUT: Final = 10.0


class _Server(ThreadingMixIn, WSGIServer):
    """One thread per connection, but never more than ``MAX_CONNECTIONS``: idle or
    half-open connections beyond that are closed as they arrive, and each one served is
    dropped after ``READ_TIMEOUT`` without a request, so they cannot pile up threads."""

    daemon_threads = True  # a scrape never holds up the controller's exit
    request_queue_size = 64

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: closed, no thread
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went silent or away is dropped without a traceback on stderr."""
        if not isinstance(sys.exc_info()[1], TimeoutError | ConnectionError):
            log.exception("metrics: serving %s failed", client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    timeout = READ_TIMEOUT  # the socket's timeout: a silent client is dropped

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr (the controller's log is for the controller)."""


class Metrics:
    """One controller's metrics. Feed it (the hooks below), ``serve`` it, ``close`` it."""

    def __init__(
        self,
        events: EventLog | None = None,
        *,
        clock: Callable[[], float] = time.time,
        state_words: Iterable[str] = STATE_WORDS,
    ):
        # No ``*_created`` series (controller-runtime has none either). A switch of the whole
        # process, but no other registry lives in a controller's process.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.events = events
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        self.snapshot: StatusSnapshot | None = None
        #: the ``state`` label's API words (``runtime/backends.STATE_WORDS``)
        self.state_words = frozenset(state_words)
        self._fold = m.EventFold(state_of=word_state)
        self._fold_lock = threading.Lock()
        self._digest: str | None = None
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}
        for spec in m.SPECS:
            short = spec.name.removeprefix(m.PREFIX)
            if spec.type == "counter":
                self._counters[short] = Counter(
                    spec.name, spec.help, spec.labels, registry=self.registry
                )
                for labels in _PRESET.get(short, ()):
                    self._counters[short].labels(*labels)
            elif spec.type == "histogram":
                self._histograms[short] = Histogram(
                    spec.name, spec.help, spec.labels, registry=self.registry,
                    buckets=_BUCKETS[short],
                )  # fmt: skip
        spec = m.SPEC["desired_last_load_timestamp_seconds"]
        self._loaded = Gauge(spec.name, spec.help, registry=self.registry)
        self.registry.register(_SnapshotGauges(self))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._address: str | None = None
        # Every change of a counter or histogram takes a new number; a scrape with the same
        # number and snapshot as the last one answers with the page it rendered then.
        self._changes = itertools.count()
        self._generation = next(self._changes)
        self._page: tuple[object, int, bytes] | None = None
        #: the address bound (port 0 resolved), while serving
        self.serving: MetricsAddress | None = None
        if events is not None:
            events.listeners.append(self.on_event)

    # -- hooks the controller calls -------------------------------------------------------------
    def intent(self, desired: Desired) -> None:
        """A pass loaded ``desired``: note a new file, follow ``settings.metrics``."""
        if desired.digest != self._digest:
            self._digest = desired.digest
            self._loaded.set(self.clock())
            self._changed()
            slots = {
                s.name: m.SlotInfo(s.zone, s.accelerator, s.mode, s.race_group, s.api)
                for s in desired.slots
            }
            with self._fold_lock:
                self._fold.intent(slots)
        self.serve(desired.settings.metrics)

    def passed(self, result: str, seconds: float) -> None:
        self._counters["reconcile"].labels(m.one_of(result, m.RESULTS)).inc()
        self._histograms["reconcile_time_seconds"].observe(seconds)
        self._changed()

    @contextlib.contextmanager
    def observing(self, cloud: object) -> Iterator[None]:
        """Time one observation and count the requests the cloud adapter sent for it."""
        sent = getattr(cloud, "requests_sent", None)
        started = time.perf_counter()
        try:
            yield
        finally:
            self._histograms["observe_duration_seconds"].observe(time.perf_counter() - started)
            after = getattr(cloud, "requests_sent", None)
            if isinstance(sent, int) and isinstance(after, int):
                self._histograms["observe_requests"].observe(after - sent)
            self._changed()

    def workloads_moved(self, before: mem.Memory, after: mem.Memory) -> None:
        for ended in ended_attempts(before, after):
            new = after.workload(ended.slot)
            if new is not None and new.run_id == ended.run_id and new.attempt > ended.attempt:
                self._counters["workload_restarts"].labels(m.restart_cause(ended.cause)).inc()
                self._changed()

    def on_event(self, record: Mapping[str, Any]) -> None:
        """An event was written (``EventLog`` listener): count what it says."""
        try:
            with self._fold_lock:
                changes = self._fold.fold(record, self.clock())
            for change in changes:
                if isinstance(change, m.Count):
                    counter = self._counters[change.metric]
                    (counter.labels(*change.labels) if change.labels else counter).inc(change.value)
                else:
                    histogram = self._histograms[change.metric]
                    target = histogram.labels(*change.labels) if change.labels else histogram
                    target.observe(change.value)
            if changes:
                self._changed()
        except Exception:  # metrics never break the event log or the pass
            log.exception("metrics: could not count event %s", record.get("kind"))

    def _changed(self) -> None:
        self._generation = next(self._changes)  # atomic: the history thread counts too

    def render(self) -> bytes:
        """The exposition text, rendered again only when a metric or the snapshot changed."""
        snapshot, generation = self.snapshot, self._generation
        page = self._page
        if page is not None and page[0] is snapshot and page[1] == generation:
            return page[2]
        body = generate_latest(self.registry)
        self._page = (snapshot, generation, body)
        return body

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the metrics are at /metrics\n"]
        body = self.render()
        headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [body]

    # -- the endpoint ---------------------------------------------------------------------------
    def serve(self, address: str | None) -> None:
        """Serve at ``address`` (as ``settings.metrics`` holds it), or stop (None)."""
        if address == self._address:
            return
        self.close()
        self._address = address
        if address is None:
            return
        where = parse_metrics_address(address)  # checked by the loader already
        try:
            server_class = _Server6 if ":" in where.host else _Server
            server = server_class((where.host, where.port), _Quiet)
        except OSError as e:  # the port is taken, the address is not this machine's, ...
            self._emit("metrics.failed", address=address, error=str(e))
            return
        server.set_app(self._app)
        self._server = server
        # No periodic wake-up while idle (the default polls twice a second, which at steady
        # state is a visible share of the controller's CPU): ``close`` wakes it to stop.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(3600.0,), name="metrics-http", daemon=True
        )
        self._thread.start()
        self.serving = MetricsAddress(where.host, int(server.server_address[1]))
        self._emit(
            "metrics.serving", address=str(self.serving), url=f"http://{self.serving}/metrics"
        )

    def close(self) -> None:
        """Stop serving (the counters stay)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        self.serving = None
        self._address = None
        if server is not None:
            host, port = server.server_address[:2]
            where = (str(host), int(port))
            stopper = threading.Thread(target=server.shutdown, name="metrics-stop", daemon=True)
            stopper.start()
            while stopper.is_alive():  # wake serve_forever's select until it sees the request
                with contextlib.suppress(OSError):
                    socket.create_connection(where, timeout=1.0).close()
                stopper.join(0.05)
            server.server_close()
        if thread is not None:
            thread.join(5.0)

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.events is None:
            return
        try:
            self.events.emit(kind, **fields)
        except OSError as e:
            log.warning("event %s not written: %s", kind, e)
