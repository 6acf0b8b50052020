"""Long-running operations: which remembered ones the world settled (``core.lro``), what a
read-back says (``runtime.lro``), the REST shapes around them, and the v1-node filter."""

from __future__ import annotations

import pytest

from reconciler.adapters.cloud import OperationStatus, Outcome, Submitted
from reconciler.adapters.cloud_errors import GRPC_STATUS, Operation, classify
from reconciler.adapters.rest import check_operation_name, is_tpu_vm_node, operation_status
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import lro as rules
from reconciler.core import memory as mem
from reconciler.emulator import Fault
from reconciler.emulator._scenario import RPC_CODE, STATUS_HTTP
from reconciler.errors import (
    OperationPending,
    PermanentCloudError,
    TransientCloudError,
    UnsafeName,
)
from reconciler.model.capacity import CapacityRequest
from reconciler.model.observed import Observation
from reconciler.runtime import lro

ZONE = "us-central2-b"
OP = f"projects/p-123456/locations/{ZONE}/operations/operation-1700000000000-abc"


def pending(kind: str, slot: str = "a") -> mem.PendingOperation:
    return mem.PendingOperation(OP, kind, ZONE, slot, 100.0)


def remembered(*ops: mem.PendingOperation) -> mem.Memory:
    memory = mem.Memory()
    for op in ops:
        memory = mem.record_operation(memory, f"{op.zone}/{op.slot}:cloud", op)
    return memory


def world(*names: str, zones: frozenset[str] | None = frozenset({ZONE})) -> Observation:
    qrs = tuple(CapacityRequest(name=n, zone=ZONE, state=QRState.ACCEPTED) for n in names)
    return Observation(requests=qrs, zones=zones)


@pytest.mark.parametrize(
    ("kind", "present", "settled"),
    [("create", True, True), ("create", False, False), ("delete", False, True),
     ("delete", True, False)],
)  # fmt: skip
def test_settle_forgets_what_the_world_shows(kind: str, present: bool, settled: bool) -> None:
    memory = remembered(pending(kind))
    after = rules.settle(memory, world(*(["a"] if present else [])))
    assert (after.operation(f"{ZONE}/a:cloud") is None) is settled


def test_an_unobserved_zone_settles_nothing() -> None:
    memory = remembered(pending("delete"))
    unseen = world(zones=frozenset({"europe-west4-a"}))
    assert rules.settle(memory, unseen).operation(f"{ZONE}/a:cloud") is not None


def test_operations_survive_a_memory_round_trip_and_old_documents_still_load() -> None:
    memory = remembered(pending("create"))
    assert mem.from_dict(mem.to_dict(memory)).operations == memory.operations
    plain = mem.to_dict(mem.Memory())
    assert "operations" not in plain  # documents without operations stay as they were
    assert mem.from_dict(plain).operations == {}


class OneOperation:
    def __init__(self, status: OperationStatus | None) -> None:
        self.status = status
        self.asked: list[str] = []

    async def get_operation(self, name: str) -> OperationStatus | None:
        self.asked.append(name)
        return self.status


async def _outcome(status: OperationStatus | None, kind: str = "create") -> object:
    cloud = OneOperation(status)
    result = await lro.previous_outcome(cloud, pending(kind))  # type: ignore[arg-type]
    assert cloud.asked == [OP]
    return result


async def test_a_running_operation_is_pending_not_resent() -> None:
    with pytest.raises(OperationPending):
        await _outcome(OperationStatus(OP, done=False))


@pytest.mark.parametrize(("recheck", "delay"), [(None, 5.0), (1.0, 1.0), (30.0, 5.0)])
async def test_a_running_operation_is_looked_at_again_on_the_fast_poll_at_most_5_s(
    recheck: float | None, delay: float
) -> None:
    cloud = OneOperation(OperationStatus(OP, done=False))
    args = () if recheck is None else (recheck,)
    with pytest.raises(OperationPending) as raised:
        await lro.previous_outcome(cloud, pending("create"), *args)  # type: ignore[arg-type]
    assert raised.value.delay == delay == min(recheck or lro.RUNNING_DELAY, lro.RUNNING_DELAY)


@pytest.mark.parametrize(
    ("status", "kind", "expected"),
    [
        (None, "create", None),  # the cloud forgot it: send again
        (OperationStatus(OP, done=True), "create", None),
        (OperationStatus(OP, True, 3, "bad runtime"), "create", PermanentCloudError),
        (OperationStatus(OP, True, 8, "no capacity"), "create", TransientCloudError),
        (OperationStatus(OP, True, 6, "exists"), "create", None),  # ALREADY_EXISTS: done
        (OperationStatus(OP, True, 9, "provisioning"), "delete", TransientCloudError),
        (OperationStatus(OP, True, 5, "gone"), "delete", None),  # NOT_FOUND on delete: done
        (OperationStatus(OP, True, 12, "nope"), "delete", PermanentCloudError),
    ],
)
async def test_a_finished_operation_is_classified_like_any_failure(
    status: OperationStatus | None, kind: str, expected: type[Exception] | None
) -> None:
    result = await _outcome(status, kind)
    if expected is None:
        assert result is None
    else:
        assert isinstance(result, expected)
        assert status is not None and status.error_message in str(result)


def test_operation_json_and_names() -> None:
    body = {"name": OP, "done": True, "error": {"code": 9, "message": "busy"}}
    assert operation_status(body) == OperationStatus(OP, True, 9, "busy")
    assert not operation_status({"name": OP}).done
    assert check_operation_name(OP) == OP
    for bad in ("../x", f"{OP}/../../other", "projects/p/locations/z/operations/", "op"):
        with pytest.raises(UnsafeName):
            check_operation_name(bad)
    assert Submitted(Outcome.DONE, OP).operation == OP


@pytest.mark.parametrize(
    ("version", "listed"),
    [(None, True), ("V2", True), ("V2_ALPHA1", True), ("V1", False), ("V1_ALPHA1", False),
     ("API_VERSION_UNSPECIFIED", False)],
)  # fmt: skip
def test_v1_nodes_are_filtered_as_gcloud_does(version: str | None, listed: bool) -> None:
    node = {"name": "projects/p/locations/z/nodes/n"}
    if version is not None:
        node["apiVersion"] = version
    assert is_tpu_vm_node(node) is listed


def test_emulator_status_names_are_googles() -> None:
    assert RPC_CODE["UNIMPLEMENTED"] == 12 and GRPC_STATUS[12] == "UNIMPLEMENTED"
    assert "NOT_IMPLEMENTED" not in RPC_CODE and "NOT_IMPLEMENTED" not in STATUS_HTTP
    assert Fault(status=501).status_name == "UNIMPLEMENTED"
    assert isinstance(classify(Operation.CREATE, code=12), PermanentCloudError)
