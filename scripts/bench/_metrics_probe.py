"""What the metrics cost a controller, for ``steady_state.py --metrics``.

``Scraper`` scrapes a running controller's ``/metrics`` every ``interval`` seconds from a
thread, as Prometheus would, timing each answer (wall time, request to last byte).
``in_process_costs`` measures, in this process, the CPU of what the metrics add to the
controller: the per-pass hooks (``intent`` with the file unchanged, ``observing``, ``passed``,
the snapshot handed over) and one scrape over HTTP of the controller's own last snapshot (the
gauges computed from 1,000 slots plus every counter and histogram, rendered and served). The
scrape's CPU is the whole process's, the HTTP client's included: an upper bound.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

import httpx
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.status_file import read_status
from reconciler.model.load import parse_desired
from reconciler.runtime.metrics import Metrics


def serving_url(events: Path) -> str | None:
    """The URL of the ``metrics.serving`` event, once the controller wrote it."""
    import json

    try:
        lines = events.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        record = json.loads(line)
        if record.get("kind") == "metrics.serving":
            return str(record["url"])
    return None


class Scraper:
    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.wall_ms: list[float] = []
        self.families = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(timeout=10.0) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                text = client.get(self.url).raise_for_status().text
                self.wall_ms.append((time.perf_counter() - started) * 1000)
                families = list(text_string_to_metric_families(text))
                self.families = len(families)
                self.samples = sum(len(f.samples) for f in families)
                self._stop.wait(self.interval)


def _median_cpu(fn: object, rounds: int) -> float:
    """Median CPU seconds of one call of ``fn``: the whole process's, every thread."""
    times = []
    for _ in range(rounds):
        started = time.process_time()
        fn()  # type: ignore[operator]
        times.append(time.process_time() - started)
    return statistics.median(times)


def in_process_costs(desired_file: Path, status_file: Path) -> tuple[float, float]:
    """(CPU s of the hooks of one pass, CPU s of rendering one scrape) at this world's size."""
    desired = parse_desired(desired_file.read_text(), str(desired_file))
    snapshot = read_status(status_file)
    metrics = Metrics()

    class Cloud:
        requests_sent = 80

    def one_pass() -> None:
        metrics.intent(desired)
        with metrics.observing(Cloud()):
            pass
        metrics.snapshot = snapshot
        metrics.passed("success", 0.2)

    one_pass()  # starts serving, on the file's settings.metrics
    assert metrics.serving is not None
    client = httpx.Client(timeout=10.0)
    url = f"http://{metrics.serving}/metrics"

    def scrape() -> None:
        client.get(url).raise_for_status()

    assert generate_latest(metrics.registry) == client.get(url).content
    hooks = _median_cpu(lambda: [one_pass() for _ in range(100)], 9) / 100
    render = _median_cpu(scrape, 31)
    client.close()
    metrics.close()
    return hooks, render
