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
from collections.abc import Callable
from typing import Any

from reconciler.emulator._scenario import Fault
from reconciler.emulator._server import RequestRecord


class EmulatorClient:
    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.timeout = timeout
        #: the Compute Engine controls, as ``Emulator.compute`` has them
        self.compute = ComputeClient(self._call)

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
        body = {"zone": zone, "node": node, "key": key, "value": value, "worker": worker}
        self._call("POST", "guest-attributes", {**body, "namespace": namespace})


class ComputeClient:
    """``ComputeControls`` over the control API: the same method names and arguments."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call

    def _post(self, path: str, **body: Any) -> Any:
        return self._call("POST", f"compute/{path}", body)

    def state(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "compute/state")
        return result

    def set_capacity(self, zone: str, machine_type: str, count: int | None) -> None:
        self._post("capacity", zone=zone, machine_type=machine_type, count=count)

    def capacity_used(self, zone: str, machine_type: str) -> int:
        return int(self._post("capacity-used", zone=zone, machine_type=machine_type))

    def set_quota(self, family: str, pool: str, region: str, chips: int | None) -> None:
        self._post("quotas", family=family, pool=pool, region=region, chips=chips)

    def preempt(self, zone: str, instance: str) -> dict[str, Any]:
        result: dict[str, Any] = self._post("preempt", zone=zone, instance=instance)
        return result

    def preempt_member(self, location: str, group: str, index: int) -> dict[str, Any]:
        result: dict[str, Any] = self._post(
            "preempt-member", location=location, group=group, index=index
        )
        return result

    def grant_flex(self, zone: str, instance: str) -> None:
        self._post("grant-flex", zone=zone, instance=instance)

    def lapse_flex(self, zone: str, instance: str) -> None:
        self._post("lapse-flex", zone=zone, instance=instance)

    def end_run(self, zone: str, instance: str) -> None:
        self._post("end-run", zone=zone, instance=instance)

    def fail_bulk(
        self, location: str, group: str, member: str | None = None, **fields: Any
    ) -> None:
        self._post("fail-bulk", location=location, group=group, member=member, **fields)

    def fail_resize_request(self, location: str, group: str, name: str, **fields: Any) -> None:
        self._post("fail-resize-request", location=location, group=group, name=name, **fields)

    def fail_operations(self, **fields: Any) -> None:
        self._post("operation-failures", **fields)

    def set_operation_delay(self, seconds: float) -> None:
        self._post("operation-delay", seconds=seconds)

    def add_instance(
        self, zone: str, name: str, machine_type: str, **options: Any
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._post(
            "instances", zone=zone, name=name, machine_type=machine_type, **options
        )
        return result

    def set_guest_attribute(
        self, zone: str, instance: str, key: str, value: str, namespace: str = "tpu-reconciler"
    ) -> None:
        self._post(
            "guest-attributes", zone=zone, instance=instance, key=key, value=value,
            namespace=namespace,
        )  # fmt: skip

    def set_maintenance(self, zone: str, instance: str, maintenance: dict[str, Any] | None) -> None:
        self._post("maintenance", zone=zone, instance=instance, maintenance=maintenance)

    def instances(self) -> list[dict[str, Any]]:
        return list(self.state()["instances"])

    def instance(self, zone: str, name: str) -> dict[str, Any] | None:
        suffix = f"/zones/{zone}/instances/{name}"
        return next((i for i in self.instances() if i["selfLink"].endswith(suffix)), None)

    def groups(self) -> list[dict[str, Any]]:
        return list(self.state()["groups"])

    def group(self, location: str, name: str) -> dict[str, Any] | None:
        suffix = f"/{location}/instanceGroupManagers/{name}"
        return next((g for g in self.groups() if g["selfLink"].endswith(suffix)), None)

    def members(self, location: str, group: str) -> list[dict[str, Any]]:
        return list(self._post("members", location=location, group=group))

    def policies(self) -> list[dict[str, Any]]:
        return list(self.state()["policies"])

    def templates(self) -> list[dict[str, Any]]:
        return list(self.state()["templates"])

    def operations(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "compute/operations"))
