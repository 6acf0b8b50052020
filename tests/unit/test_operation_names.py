"""Both backends remember only an operation name that can be read back later."""

from __future__ import annotations

from reconciler.adapters._gcloud_output import operation_name
from reconciler.adapters.cloud_errors import Operation
from reconciler.adapters.gcloud import CAPABILITY
from reconciler.adapters.rest import _submitted

OP = "projects/my-project-123/locations/us-central2-b/operations/operation-1733-abc"


def test_gcloud_and_rest_remember_a_real_operation_name() -> None:
    assert operation_name({"name": OP}, CAPABILITY) == OP
    assert _submitted(Operation.CREATE, {"name": OP}).operation == OP


def test_a_name_that_could_not_be_read_back_is_not_remembered() -> None:
    for bad in ("operation-1", f"{OP}/../x", f"{OP}?alt=1", "", None, 7):
        assert operation_name({"name": bad}, CAPABILITY) is None
        assert (
            _submitted(Operation.DELETE, {"name": bad if isinstance(bad, str) else ""}).operation
            is None
        )
