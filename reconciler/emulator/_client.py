"""``EmulatorClient``: the emulator's controls for an emulator in another process.

Speaks the ``/_emulator/`` control API (see ``_control``) with the standard library's urllib;
method names and arguments mirror ``Emulator`` so a test or demo reads the same either way.
A 404 raises ``LookupError`` and a 400 ``ValueError``, as the in-process methods do.
"""

from __future__ import annotations

import collections
import json
import urllib.error
import urllib.request
from typing import Any

from reconciler.emulator._scenario import Fault
from reconciler.emulator._server import RequestRecord


class EmulatorClient:
    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}_emulator/{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = str(exc)
            raise (LookupError if exc.code == 404 else ValueError)(message) from None

    def state(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "state")
        return result

    def now(self) -> float:
        return float(self.state()["now"])

    def queued_resources(self) -> list[dict[str, Any]]:
        return list(self.state()["queuedResources"])

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.state()["nodes"])

    def queued_resource(self, zone: str, name: str) -> dict[str, Any] | None:
        suffix = f"/locations/{zone}/queuedResources/{name}"
        return next((q for q in self.queued_resources() if q["name"].endswith(suffix)), None)

    def node(self, zone: str, name: str) -> dict[str, Any] | None:
        suffix = f"/locations/{zone}/nodes/{name}"
        return next((n for n in self.nodes() if n["name"].endswith(suffix)), None)

    def set_capacity(
        self, zone: str, accelerator: str, count: int | None, *, shortage: str | None = None
    ) -> None:
        body = {"zone": zone, "accelerator": accelerator, "count": count, "shortage": shortage}
        self._call("POST", "capacity", body)

    def preempt(self, zone: str, node: str) -> None:
        self._call("POST", "preempt", {"zone": zone, "node": node})

    def fail_queued_resource(
        self, zone: str, name: str, status: str = "RESOURCE_EXHAUSTED", message: str = ""
    ) -> None:
        body = {"zone": zone, "name": name, "status": status, "message": message}
        self._call("POST", "fail", body)

    def inject_fault(self, fault: Fault) -> None:
        body = fault.body.decode() if isinstance(fault.body, bytes) else fault.body
        self._call(
            "POST",
            "faults",
            {
                "status": fault.status, "method": fault.method, "path": fault.path,
                "count": fault.count, "latency": fault.latency, "body": body,
            },
        )  # fmt: skip

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    def set_latency(self, seconds: float) -> None:
        self._call("POST", "latency", {"seconds": seconds})

    def fail_deletes_while_provisioning(self, enabled: bool = True) -> None:
        self._call("POST", "fail-deletes-while-provisioning", {"enabled": enabled})

    def fail_operations(self, **fields: Any) -> None:
        self._call("POST", "operation-failures", fields)

    def set_unreachable(self, zone: str, unreachable: bool = True) -> None:
        self._call("POST", "unreachable", {"zone": zone, "unreachable": unreachable})

    def advance(self, seconds: float) -> None:
        self._call("POST", "advance", {"seconds": seconds})

    def set_speed(self, speed: float) -> None:
        self._call("POST", "speed", {"speed": speed})

    def add_queued_resource(
        self, zone: str, name: str, accelerator: str = "v4-8", **options: Any
    ) -> dict[str, Any]:
        body = {"zone": zone, "name": name, "accelerator": accelerator, **options}
        result: dict[str, Any] = self._call("POST", "queued-resources", body)
        return result

    def requests(self) -> list[RequestRecord]:
        return [RequestRecord(**r) for r in self._call("GET", "requests")["requests"]]

    def request_counts(self) -> collections.Counter[str]:
        return collections.Counter(self._call("GET", "requests")["counts"])

    def clear_requests(self) -> None:
        self._call("DELETE", "requests")

    def set_quota(
        self,
        family: str,
        mode: str,
        chips: int | None,
        *,
        zone: str | None = None,
        region: str | None = None,
    ) -> None:
        body = {"family": family, "mode": mode, "chips": chips, "zone": zone, "region": region}
        self._call("POST", "quotas", body)
