"""The emulator's records (queued resources, nodes, operations) and their API JSON.

Values and rendering only: no clock, no I/O. Field names and enum values follow the SDK's
generated messages (``googlecloudsdk/generated_clients/apis/tpu/v2/tpu_v2_messages.py``):
``QueuedResource``, ``QueuedResourceState``, ``Node``, ``NetworkEndpoint``, ``Operation``,
``OperationMetadata``, ``Status``. Every renderer takes the project to write into resource
names, because the emulator serves one set of resources under any project id.
"""

from __future__ import annotations

import bisect
import copy
import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.emulator._scenario import RPC_CODE, STATUS_HTTP

JSON = dict[str, Any]

#: ``QueuedResourceState.<x>Data`` field for each state (WAITING_FOR_RESOURCES has none).
STATE_DATA = {
    "CREATING": "creatingData",
    "ACCEPTED": "acceptedData",
    "PROVISIONING": "provisioningData",
    "ACTIVE": "activeData",
    "SUSPENDING": "suspendingData",
    "SUSPENDED": "suspendedData",
    "FAILED": "failedData",
    "DELETING": "deletingData",
}
#: Default TPU VM service-account scopes, as the service fills them in.
_SCOPES = [
    "https://www.googleapis.com/auth/devstorage.read_write",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/service.management",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/pubsub",
]


class ApiError(Exception):
    """A request the emulated API refuses, in Google's terms (``status`` is a canonical name)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def http_status(self) -> int:
        return STATUS_HTTP.get(self.status, 500)

    def body(self) -> JSON:
        return {"error": {"code": self.http_status, "message": self.message, "status": self.status}}


def no_capacity(zone: str) -> str:
    """The service's stock-out message (``failedData.error.message`` with code 8)."""
    return (
        f'There is no more capacity in the zone "{zone}"; you can try in another zone where '
        "Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) "
        "[EID: 0xemulator]"
    )


def expired(name: str, zone: str) -> str:
    return f"Queued resource {name} was not provisioned before its validUntil time: " + (
        no_capacity(zone)
    )


def rpc_status(status: str, message: str) -> JSON:
    """A google.rpc.Status (``failedData.error``, ``Operation.error``)."""
    return {"code": RPC_CODE.get(status, 2), "message": message}


class Clock:
    """Turns emulated seconds into RFC 3339 timestamps of the wall clock, and back.

    A fast clock speeds transitions, not stamps: emulated time runs ``speed`` times faster than
    the wall clock (and ``advance`` jumps it), yet a time the API reports is the wall-clock
    moment at which that emulated moment came, so no stamp lies ahead of the wall clock and a
    stamp once reported never changes. The mapping is piecewise linear: an *anchor*
    ``(t, wall, speed)`` says that emulated time ``t`` came at ``wall`` and ran ``speed``
    emulated seconds per wall second after it. The server adds one whenever the speed changes
    or the clock jumps (emulated moments inside a jump all came at the wall time of the jump).
    Without anchors of its own (a bare ``World`` in a unit test) emulated time 0 is ``epoch``
    and runs at speed 1.
    """

    def __init__(self, epoch: float) -> None:
        self.epoch = epoch
        self._starts: list[float] = [0.0]
        self._anchors: list[tuple[float, float, float]] = [(0.0, epoch, 1.0)]

    def anchor(self, t: float, wall: float, speed: float) -> None:
        """From emulated time ``t`` (now), reached at ``wall``, time runs at ``speed`` (>= 0).
        Moments up to ``t`` keep the wall time they had."""
        if len(self._anchors) > 1 and self._anchors[-1][0] >= t:
            self._starts.pop()  # never used: nothing lies after it yet
            self._anchors.pop()
        t = max(t, self._starts[-1])
        wall = max(wall, self._anchors[-1][1])
        self._starts.append(t)
        self._anchors.append((t, wall, speed))

    def wall(self, t: float) -> float:
        """The wall-clock time (epoch seconds) at which emulated time ``t`` came."""
        index = max(bisect.bisect_left(self._starts, t) - 1, 0)
        start, wall, speed = self._anchors[index]
        if t <= start:  # before the first anchor: a scenario's past, at speed 1
            return wall + (t - start)
        moment = wall + (t - start) / speed if speed > 0 else wall
        if index + 1 < len(self._anchors):
            moment = min(moment, self._anchors[index + 1][1])
        return moment

    def emulated(self, wall_time: float) -> float:
        """The emulated time at which the wall clock shows ``wall_time``: the inverse of
        ``wall`` (a moment of a jump maps to the jump's end). Past the last anchor it runs at
        that anchor's speed, or at speed 1 while the clock stands still (``speed`` 0), so a
        time ahead stays ahead of a frozen clock by as many emulated seconds."""
        walls = [a[1] for a in self._anchors]
        index = bisect.bisect_right(walls, wall_time) - 1
        if index < 0:
            start, wall, _ = self._anchors[0]
            return start + (wall_time - wall)
        start, wall, speed = self._anchors[index]
        if index + 1 < len(self._anchors):
            return min(start + (wall_time - wall) * speed, self._anchors[index + 1][0])
        return start + (wall_time - wall) * (speed if speed > 0 else 1.0)

    def stamp(self, t: float) -> str:
        micros = int(self.wall(t) * 1_000_000)  # floored: never a microsecond ahead
        moment = _dt.datetime.fromtimestamp(micros // 1_000_000, tz=_dt.UTC)
        return f"{moment:%Y-%m-%dT%H:%M:%S}.{micros % 1_000_000:06d}Z"

    def parse(self, text: str) -> float:
        """An RFC 3339 timestamp (wall clock) as emulated seconds (may be negative)."""
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return self.emulated(moment.timestamp())


@dataclass(slots=True)
class NodeRecord:
    zone: str
    name: str
    uid: int
    qr_name: str
    created: float
    state: str = "CREATING"
    # (internal ip, external ip or None), worker 0 first; filled when the node becomes READY
    endpoints: list[tuple[str, str | None]] = field(default_factory=list)
    health: str | None = None  # set from the control API; else HEALTHY while READY
    symptoms: list[JSON] = field(default_factory=list)  # ``Symptom`` JSON, as given
    maintenance: JSON | None = None  # ``UpcomingMaintenance`` JSON, as given
    #: guest attributes the VMs wrote (a test's, as a booted worker's script would):
    #: worker index -> (namespace, key) -> value
    guest: dict[int, dict[tuple[str, str], str]] = field(default_factory=dict)
    metadata: JSON | None = None  # set by ``nodes.patch``; else the create's


@dataclass(slots=True)
class QRRecord:
    zone: str
    name: str
    seq: int
    node_id: str
    accelerator: str
    node_spec: JSON  # ``nodeSpec[0].node`` as requested
    tier: JSON  # {"spot": {}} | {"guaranteed": {...}} | {"reservationName": "..."} | {}
    queueing_policy: JSON | None
    created: float
    state: str = "CREATING"
    initiator: str | None = None
    error: JSON | None = None
    next_at: float | None = None  # when the current state's timer fires
    deadline: float | None = None  # validUntil: still queued then -> FAILED
    valid_after: float = 0.0
    holds: bool = False  # holds one unit of (zone, accelerator) capacity
    node: NodeRecord | None = None
    create_op: str | None = None
    delete_ops: list[str] = field(default_factory=list)
    max_run: float | None = None  # flex-start: runDuration.maxRunDuration in seconds
    ends: float | None = None  # flex-start: when the run ends (set once ACTIVE)
    node_count: int = 1  # multislice: nodes <node_id>-0 ... (node_id is then the prefix)
    slices: list[NodeRecord] = field(default_factory=list)  # a multislice QR's nodes, 1 ...

    @property
    def capacity_key(self) -> tuple[str, str]:
        return (self.zone, self.accelerator)

    @property
    def all_nodes(self) -> list[NodeRecord]:
        """Its node, or a multislice QR's every node (slice 0 first)."""
        return ([self.node] if self.node is not None else []) + self.slices

    def node_ids(self) -> list[str]:
        if self.node_count <= 1:
            return [self.node_id]
        return [f"{self.node_id}-{i}" for i in range(self.node_count)]

    def snapshot(self) -> QRRecord:
        snap = copy.copy(self)
        snap.node = copy.copy(self.node)
        return snap


@dataclass(slots=True)
class OpRecord:
    zone: str
    op_id: str
    verb: str  # "create" | "delete"
    target: str  # QR id
    created: float
    done: bool = False
    ended: float | None = None
    due_at: float | None = None  # for operations that resolve on a timer
    error: JSON | None = None
    response: Callable[[str], JSON] | None = None  # project -> response JSON
    collection: str = "queuedResources"  # of its target ("nodes" for a node's update)


def location(project: str, zone: str) -> str:
    return f"projects/{project}/locations/{zone}"


def flex_rejected(accelerator: str, zone: str) -> str:
    """What a zone answers a flex-start create it does not offer."""
    return (
        f'FLEX_START provisioning model is not supported for accelerator type "{accelerator}" '
        f'in location "{zone}"'
    )


def _flex_fields(qr: QRRecord, clock: Clock) -> JSON:
    """v2alpha1's ``provisioningModel`` and ``runDuration`` of a flex-start QR."""
    run: JSON = {"maxRunDuration": f"{int(qr.max_run or 0)}s"}
    if qr.ends is not None:
        run["terminationTime"] = clock.stamp(qr.ends)
    return {"provisioningModel": "FLEX_START", "runDuration": run}


def render_qr(qr: QRRecord, project: str, clock: Clock, *, alpha: bool | None = None) -> JSON:
    """``alpha``: as v2alpha1 shows it (a flex-start QR's fields, ``multiNodeParams``); False
    for v2; None (the emulator's own views, an operation's response): as the API it was
    created through shows it (v2alpha1 for a flex-start QR, else v2)."""
    if alpha is None:
        alpha = qr.max_run is not None
    state: JSON = {"state": qr.state}
    data = STATE_DATA.get(qr.state)
    if data == "failedData":
        state[data] = {"error": qr.error or rpc_status("UNKNOWN", "failed")}
    elif data is not None:
        state[data] = {}
    if qr.initiator:
        state["stateInitiator"] = qr.initiator
    parent = location(project, qr.zone)
    body: JSON = {
        "name": f"{parent}/queuedResources/{qr.name}",
        "createTime": clock.stamp(qr.created),
        "tpu": {
            "nodeSpec": [
                {"parent": parent, "nodeId": qr.node_id, "node": copy.deepcopy(qr.node_spec)}
            ]
        },
    }
    if qr.node_count > 1:
        spec = body["tpu"]["nodeSpec"][0]
        del spec["nodeId"]
        key = "multiNodeParams" if alpha else "multisliceParams"  # v2alpha1's name, v2's
        spec[key] = {"nodeCount": qr.node_count, "nodeIdPrefix": qr.node_id}
    body |= {
        "state": state,
    }
    body.update(copy.deepcopy(qr.tier))
    if qr.queueing_policy:
        body["queueingPolicy"] = copy.deepcopy(qr.queueing_policy)
    if alpha and qr.max_run is not None:
        body.update(_flex_fields(qr, clock))
    return body


def render_node(node: NodeRecord, qr: QRRecord, project: str, clock: Clock) -> JSON:
    spec = qr.node_spec
    parent = location(project, node.zone)
    network = {"network": "default", "subnetwork": "default", "enableExternalIps": True}
    network.update(spec.get("networkConfig") or {})
    scheduling: JSON = {}
    if "spot" in qr.tier:
        scheduling["spot"] = True
    if "reservationName" in qr.tier:
        scheduling["reserved"] = True
    account = dict(spec.get("serviceAccount") or {})
    account.setdefault("email", "default")
    account.setdefault("scope", list(_SCOPES))
    body: JSON = {
        "name": f"{parent}/nodes/{node.name}",
        "acceleratorType": qr.accelerator,
        "runtimeVersion": spec.get("runtimeVersion", ""),
        "state": node.state,
        "id": str(node.uid),
        "createTime": clock.stamp(node.created),
        "apiVersion": "V2",
        "networkConfig": network,
        "networkEndpoints": [_endpoint(ip, ext) for ip, ext in node.endpoints],
        "queuedResource": f"{parent}/queuedResources/{qr.name}",
        **({"multisliceNode": True} if qr.node_count > 1 else {}),
        "serviceAccount": account,
        "schedulingConfig": scheduling,
        "shieldedInstanceConfig": {},
    }
    if node.health is not None:
        body["health"] = node.health
    elif node.state == "READY":
        body["health"] = "HEALTHY"
    if node.symptoms:
        body["symptoms"] = copy.deepcopy(node.symptoms)
    if node.maintenance:
        body["upcomingMaintenance"] = copy.deepcopy(node.maintenance)
    for key in ("labels", "metadata", "tags", "description", "dataDisks"):
        if spec.get(key):
            body[key] = copy.deepcopy(spec[key])
    if node.metadata is not None:  # updated on the live node (``nodes.patch``)
        body["metadata"] = copy.deepcopy(node.metadata)
        if not node.metadata:
            del body["metadata"]
    if not body["networkEndpoints"]:
        del body["networkEndpoints"]
    return body


def _endpoint(ip: str, external: str | None) -> JSON:
    endpoint: JSON = {"ipAddress": ip, "port": 8470}
    if external:
        endpoint["accessConfig"] = {"externalIp": external}
    return endpoint


def render_op(op: OpRecord, project: str, clock: Clock) -> JSON:
    parent = location(project, op.zone)
    metadata: JSON = {
        "@type": "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
        "createTime": clock.stamp(op.created),
        "target": f"{parent}/{op.collection}/{op.target}",
        "verb": op.verb,
        "cancelRequested": False,
        "apiVersion": "v2",
    }
    if op.ended is not None:
        metadata["endTime"] = clock.stamp(op.ended)
    body: JSON = {"name": f"{parent}/operations/{op.op_id}", "metadata": metadata, "done": op.done}
    if op.done and op.error is not None:
        body["error"] = copy.deepcopy(op.error)
    elif op.done and op.response is not None:
        body["response"] = op.response(project)
    return body


def worker_vm(node: NodeRecord, index: int) -> str:
    """Worker ``index``'s VM name, shaped like a TPU VM's (``t1v-n-<8 hex>-w-<index>``)."""
    return f"t1v-n-{node.uid % 0x100000000:08x}-w-{index}"


def guest_attributes(node: NodeRecord, query_path: str, worker_ids: list[str]) -> JSON:
    """``GetGuestAttributesResponse``: one entry per worker (all workers when none are named),
    with its ``hostname`` (the VM name gcloud's IAP tunnel asks for) and what its VM wrote
    (``NodeRecord.guest``)."""
    wanted = {int(w) for w in worker_ids if str(w).isdigit()}
    entries = []
    for index, (ip, external) in enumerate(node.endpoints):
        if wanted and index not in wanted:
            continue
        items = [
            {"namespace": "guest-agent", "key": "worker-id", "value": str(index)},
            {"namespace": "guest-agent", "key": "internal-ip", "value": ip},
            {"namespace": "guest-agent", "key": "hostname", "value": worker_vm(node, index)},
        ]
        if external:
            items.append({"namespace": "guest-agent", "key": "external-ip", "value": external})
        items += [
            {"namespace": ns, "key": key, "value": value}
            for (ns, key), value in sorted(node.guest.get(index, {}).items())
        ]
        if query_path.strip("/"):
            prefix = query_path.strip("/")
            items = [i for i in items if f"{i['namespace']}/{i['key']}".startswith(prefix)]
        entries.append({"queryPath": query_path, "queryValue": {"items": items}})
    return {"guestAttributes": entries}


def login_profile(account: str, username: str, project: str | None) -> JSON:
    """An OS Login ``LoginProfile``: one POSIX account, marked primary, for ``username``.
    ``account`` is the user of the request path (gcloud sends its account's email, or
    ``None`` when it has none); the service omits the empty ``sshPublicKeys`` map."""
    posix: JSON = {
        "primary": True,
        "username": username,
        "uid": "1001",
        "gid": "1001",
        "homeDirectory": f"/home/{username}",
        "operatingSystemType": "LINUX",
        "name": f"users/{account}/projects/{project or 'emulated-project'}",
    }
    if project:
        posix["accountId"] = project
    return {"name": account, "posixAccounts": [posix]}
