"""The chip probe that runs on each worker: TPU figures and the processes holding the chips.

Not imported by the controller: ``adapters/telemetry.py`` sends this file's text as the
program of ``python -c`` on a pooled SSH channel (the private venv's python that
``setup.telemetry`` installs, else the worker's ``python3``) and keeps it running, one request
line in, one JSON line out:

``chips``
    ``{"chips": [{"index", "duty", "hbm_used", "hbm_total", "holders"}], "holders": [...],
    "metrics": "" | why they are unknown}``. The figures come from libtpu's
    ``RuntimeMetricService`` (gRPC, the stubs of Google's ``tpu-info`` package) on every port
    of ``TPU_RUNTIME_METRICS_PORTS`` (this process's environment, else the VM's ``tpu-env``:
    the file ``<base>/tpu-env``, else the metadata server, whose answer is kept in that file;
    default 8431). A figure the service does not give is ``null`` (unknown). Holders are the
    processes with one of the device files open (``/proc/*/fd``): pid, command, user, age in
    seconds, device, and the workload slot and run id from their environment when readable.
``probe <attempt dir>`` (started with ``--wrapper PATH``)
    the workload wrapper's probe line (from its ``serve``, kept running), a tab, and the
    ``chips`` answer: the workload's state and its chips in one request and one answer.
``kill <grace_ms> <pid> ...``
    SIGTERM to each pid that still holds a device, SIGKILL to those left after the grace;
    answers ``{"stopped": [pids], "left": [pids]}``.

Standard library only, apart from ``grpc`` and ``tpu_info`` (optional: without them every
figure is unknown, the holders are still found).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

_METADATA = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env"
_DUTY = "tpu.runtime.tensorcore.dutycycle.percent"
_USED = "tpu.runtime.hbm.memory.usage.bytes"
_TOTAL = "tpu.runtime.hbm.memory.total.bytes"
_RPC_TIMEOUT = 0.5


def _ports(base: str) -> list[int]:
    text = os.environ.get("TPU_RUNTIME_METRICS_PORTS")
    if text is None:
        cache = os.path.join(base, "tpu-env")
        env = ""
        try:
            with open(cache) as f:
                env = f.read()
        except OSError:
            try:
                request = urllib.request.Request(_METADATA, headers={"Metadata-Flavor": "Google"})
                with urllib.request.urlopen(request, timeout=1.0) as answer:
                    env = answer.read().decode("utf-8", "replace")
            except Exception:
                env = ""
            try:
                with open(cache, "w") as f:
                    f.write(env)
            except OSError:
                pass
        for line in env.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "TPU_RUNTIME_METRICS_PORTS":
                text = value.strip().strip("'\"")
    ports = [int(p) for p in (text or "8431").split(",") if p.strip().isdigit()]
    return ports or [8431]


class Metrics:
    def __init__(self, base: str) -> None:
        self.base = base
        self.stubs: dict[int, Any] | None = None
        self.error = ""
        try:
            import grpc  # noqa: F401
            from tpu_info.proto import tpu_metric_service_pb2 as pb  # noqa: F401
            from tpu_info.proto import tpu_metric_service_pb2_grpc as pb_grpc  # noqa: F401
        except Exception as exc:  # no venv: every figure unknown
            self.error = f"no metrics client on the worker ({type(exc).__name__})"

    def _stub(self, port: int) -> Any:
        import grpc
        from tpu_info.proto import tpu_metric_service_pb2_grpc as pb_grpc

        if self.stubs is None:
            self.stubs = {}
        stub = self.stubs.get(port)
        if stub is None:
            channel = grpc.secure_channel(f"localhost:{port}", grpc.local_channel_credentials())
            stub = self.stubs[port] = pb_grpc.RuntimeMetricServiceStub(channel)
        return stub

    def read(self) -> tuple[list[dict[str, Any]], str]:
        if self.error:
            return [], self.error
        from tpu_info.proto import tpu_metric_service_pb2 as pb

        chips: list[dict[str, Any]] = []
        why = ""
        for port in _ports(self.base):
            found: dict[str, dict[int, float]] = {}
            for name in (_DUTY, _USED, _TOTAL):
                try:
                    answer = self._stub(port).GetRuntimeMetric(
                        pb.MetricRequest(metric_name=name), timeout=_RPC_TIMEOUT
                    )
                except Exception as exc:
                    why = f"port {port}: {type(exc).__name__}"
                    continue
                values: dict[int, float] = {}
                for m in answer.metric.metrics:
                    gauge = m.gauge
                    kind = gauge.WhichOneof("value")
                    if kind in ("as_double", "as_int"):
                        values[int(m.attribute.value.int_attr)] = float(getattr(gauge, kind))
                found[name] = values
            duty = found.get(_DUTY, {})
            used, total = (
                _per_chip(found.get(_USED, {}), len(duty)),
                _per_chip(found.get(_TOTAL, {}), len(duty)),
            )
            indexes = sorted(set(duty) | set(used) | set(total))
            offset = len(chips)
            for i in indexes:
                chips.append(
                    {
                        "index": offset + i,
                        "duty": duty.get(i),
                        "hbm_used": used.get(i),
                        "hbm_total": total.get(i),
                    }
                )
        return chips, ("" if chips else why or "no chips reported")


def _per_chip(values: dict[int, float], chips: int) -> dict[int, float]:
    """Memory is reported per core; a chip with two cores sums them."""
    if chips and len(values) == 2 * chips:
        ordered = [values[k] for k in sorted(values)]
        return {i: ordered[2 * i] + ordered[2 * i + 1] for i in range(chips)}
    return values


def _natural(path: str) -> list[Any]:
    """``/dev/accel2`` before ``/dev/accel10``: chip N is the N-th device."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def _devices(patterns: list[str]) -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        found += sorted(glob.glob(pattern), key=_natural)
    return found


def _holders(devices: list[str]) -> list[dict[str, Any]]:
    wanted = {os.path.realpath(d): d for d in devices}
    if not wanted:
        return []
    out: dict[int, dict[str, Any]] = {}
    me = os.getpid()
    for fd_dir in glob.glob("/proc/[0-9]*/fd"):
        pid = int(fd_dir.split("/")[2])
        if pid == me:
            continue
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue
            if target in wanted and pid not in out:
                out[pid] = _describe(pid, wanted[target])
    return sorted(out.values(), key=lambda h: h["pid"])


def _describe(pid: int, device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"pid": pid, "device": device, "command": "?", "user": "?"}
    try:
        with open(f"/proc/{pid}/comm") as f:
            info["command"] = f.read().strip()
        uid = os.stat(f"/proc/{pid}").st_uid
        try:
            info["user"] = pwd.getpwuid(uid).pw_name
        except KeyError:
            info["user"] = str(uid)
        with open(f"/proc/{pid}/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            info["age"] = max(0.0, float(f.read().split()[0]) - started)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                key, _, value = item.partition(b"=")
                if key == b"TPU_RECONCILER_SLOT":
                    info["slot"] = value.decode("utf-8", "replace")
                elif key == b"TPU_RECONCILER_RUN_ID":
                    info["run_id"] = value.decode("utf-8", "replace")
    except OSError:
        pass
    return info


def _kill(devices: list[str], grace: float, pids: list[int]) -> dict[str, Any]:
    holding = {h["pid"] for h in _holders(devices)}
    targets = [p for p in pids if p in holding]
    for pid in targets:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = targets
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        holding = {h["pid"] for h in _holders(devices)}
        left = [p for p in left if p in holding]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    holding = {h["pid"] for h in _holders(devices)}
    while left and any(p in holding for p in left) and time.monotonic() < deadline:
        time.sleep(0.05)
        holding = {h["pid"] for h in _holders(devices)}
    return {"stopped": [p for p in targets if p not in holding], "left": sorted(holding)}


class Wrapper:
    """The workload wrapper's ``serve``, kept running: its probe answer and the chips go back
    as one line (``<wrapper answer>\\t<chips JSON>``), one request and one answer a pass."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.process: subprocess.Popen[str] | None = None

    def probe(self, directory: str) -> str:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                ["bash", self.path, "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"probe {directory}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer.endswith("\n"):
            self.process = None
            raise EOFError("the wrapper's serve ended")
        return answer.strip()


def _chips(metrics: Metrics, patterns: list[str]) -> dict[str, Any]:
    devices = _devices(patterns)
    chips, why = metrics.read()
    holders = _holders(devices)
    for chip in chips:
        i = chip["index"]
        chip["holders"] = (
            [h["pid"] for h in holders if h["device"] == devices[i]] if i < len(devices) else []
        )
    return {"chips": chips, "holders": holders, "metrics": why}


def serve(base: str, patterns: list[str]) -> None:
    metrics = Metrics(base)
    wrapper: Wrapper | None = None
    if patterns[:1] == ["--wrapper"] and len(patterns) >= 2:
        wrapper, patterns = Wrapper(patterns[1]), patterns[2:]
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["probe"] and len(words) == 2 and wrapper is not None:
            try:
                state = wrapper.probe(words[1])
            except Exception as exc:
                state = f"error {type(exc).__name__}"
            try:
                chips = _chips(metrics, patterns)
            except Exception as exc:
                chips = {"chips": [], "holders": [], "metrics": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(state + "\t" + json.dumps(chips, separators=(",", ":")) + "\n")
            sys.stdout.flush()
            continue
        try:
            if words[:1] == ["chips"]:
                answer: dict[str, Any] = _chips(metrics, patterns)
            elif words[:1] == ["kill"] and len(words) >= 2:
                pids = [int(p) for p in words[2:]]
                answer = _kill(_devices(patterns), int(words[1]) / 1000, pids)
            else:
                answer = {"error": f"unknown request {line.strip()[:80]!r}"}
        except Exception as exc:  # one bad request must not end the channel
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "serve":
        sys.exit("usage: telemetry_probe.py serve BASE [--wrapper PATH] [DEVICE-GLOB ...]")
    serve(sys.argv[2], sys.argv[3:])
