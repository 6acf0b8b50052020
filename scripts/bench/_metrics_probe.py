"""What the metrics cost a controller, for ``steady_state.py --metrics``.

``Scraper`` scrapes a running controller's ``/metrics`` every ``interval`` seconds from a
thread, as Prometheus would, timing each answer (wall time, request to last byte).
``in_process_costs`` measures, in this process, the CPU of what the metrics add to the
controller: the per-pass hooks (``intent`` with the file unchanged, ``observing``, ``passed``,
the snapshot handed over) and one scrape of the controller's own last snapshot as a scrape right
after a pass costs: the gauges computed afresh from 1,000 slots, the page rendered, and served
over HTTP (the client is another process, so its CPU is not counted). A scrape between two
passes answers with the page already made (nothing changes between two steady passes), so
only the first scrape after each pass pays for making it.
"""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
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


def in_process_costs(desired_file: Path, status_file: Path) -> tuple[float, float, float]:
    """CPU seconds, at this world's size, of: the hooks of one pass; serving one scrape whose
    page is already made; making the page again after a pass (the gauges and the render)."""
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
    hooks = _median_cpu(lambda: [one_pass() for _ in range(100)], 9) / 100
    assert metrics.serving is not None
    url = f"http://{metrics.serving}/metrics"
    # Serving a page: the scrapes come from another process, so this process's CPU is the
    # server's alone; the difference of 105 and 5 scrapes leaves the client's start-up out.
    client = (
        "import httpx, sys\n"
        "with httpx.Client() as c:\n"
        "    for _ in range(int(sys.argv[2])):\n"
        "        c.get(sys.argv[1]).raise_for_status()\n"
    )
    spent = []
    for rounds in (5, 105):
        started = time.process_time()
        subprocess.run([sys.executable, "-c", client, url, str(rounds)], check=True)
        spent.append(time.process_time() - started)
    served = (spent[1] - spent[0]) / 100

    def fresh() -> None:  # a new snapshot after a pass: the gauges and the page made again
        metrics.snapshot = dataclasses.replace(snapshot)
        metrics.passed("success", 0.2)
        metrics.render()

    copy = _median_cpu(lambda: dataclasses.replace(snapshot), 31)
    remade = max(0.0, _median_cpu(fresh, 31) - copy)
    metrics.close()
    return hooks, served, remade
