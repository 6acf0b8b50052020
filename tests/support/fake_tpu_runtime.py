"""A fake libtpu ``RuntimeMetricService`` (gRPC) built on the stubs of Google's ``tpu-info``.

``start(script)`` serves on a free localhost port (local credentials, as libtpu's service
wants) and returns the server and port; every answer reads ``script`` at that moment (duty
cycle, HBM used and total per chip, or nothing at all once ``vanished``), so a test can script
busy, idle and gone. ``worker_files(home, port)`` writes what the probe on a worker reads:
the VM's ``tpu-env`` naming the port, and a ``telemetry/bin/python`` standing in for the venv
``setup.telemetry`` installs (this interpreter, which has tpu-info).

``python -m tests.support.fake_tpu_runtime`` serves in a process of its own and prints its
port (the benchmark keeps its work off the controller's CPU figure).
"""

from __future__ import annotations

import sys
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from tpu_info.proto import tpu_metric_service_pb2 as pb
from tpu_info.proto import tpu_metric_service_pb2_grpc as pb_grpc

GIB = 1024**3
DUTY = "tpu.runtime.tensorcore.dutycycle.percent"
USED = "tpu.runtime.hbm.memory.usage.bytes"
TOTAL = "tpu.runtime.hbm.memory.total.bytes"


@dataclass
class Script:
    """What the fake runtime answers right now (change it under ``lock``)."""

    chips: int = 4
    duty: float = 97.0
    used: int = 7 * GIB
    total: int = 8 * GIB
    vanished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeRuntime(pb_grpc.RuntimeMetricServiceServicer):  # type: ignore[misc]
    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls = 0

    def GetRuntimeMetric(self, request: Any, context: Any) -> Any:
        self.calls += 1
        answer = pb.MetricResponse()
        with self.script.lock:
            s = self.script
            if s.vanished:
                return answer
            answer.metric.name = request.metric_name
            value = {DUTY: s.duty, USED: s.used, TOTAL: s.total}.get(request.metric_name)
            if value is None:
                return answer
            for chip in range(s.chips):
                m = answer.metric.metrics.add()
                m.attribute.key = "device-id"
                m.attribute.value.int_attr = chip
                if isinstance(value, float):
                    m.gauge.as_double = value
                else:
                    m.gauge.as_int = value
        return answer


def start(script: Script) -> tuple[Any, FakeRuntime, int]:
    fake = FakeRuntime(script)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_RuntimeMetricServiceServicer_to_server(fake, server)
    port = server.add_secure_port("localhost:0", grpc.local_server_credentials())
    server.start()
    return server, fake, port


def worker_files(home: Path, port: int) -> None:
    base = home / ".tpu-reconciler"
    (base / "telemetry" / "bin").mkdir(parents=True, exist_ok=True)
    (base / "tpu-env").write_text(
        f"ACCELERATOR_TYPE: 'v4-32'\nTPU_RUNTIME_METRICS_PORTS: '{port}'\n"
    )
    python = base / "telemetry" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)


if __name__ == "__main__":
    server, _, port = start(Script())
    print(port, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        server.stop(None)
