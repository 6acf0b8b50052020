"""What the file changes of a held request: its API, accelerator, slices, machine type,
topology or hosts. None of them can be changed in place (a TPU API queued resource and a
Compute Engine instance or MIG are made once, in one shape, by one API), so the planner
replaces the request (``-/+``, under the delete guard like a delete: ``Action.reshape``), with
these words as its reason.

When the API changes, the rest of the shape is the new API's own (only the accelerator and
slices are compared across). A field the observed request does not say (``None``: an API
that does not report it, a request made by hand) is not compared: only a difference seen for
sure replaces a TPU.

Pure: values in, words out.
"""

from __future__ import annotations

from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import SlotSpec


def changes(spec: SlotSpec, request: CapacityRequest) -> list[str]:
    """``["api tpu -> compute", "topology 2x4 -> 4x4"]``: each field the file changes."""
    out: list[str] = []

    def compare(what: str, held: object, wanted: object) -> None:
        if held is not None and held != "" and wanted is not None and held != wanted:
            out.append(f"{what} {held} -> {wanted}")

    compare("api", request.api, spec.api)
    compare("accelerator", request.accelerator, spec.accelerator)
    compare("slices", request.slices, spec.slices)
    if out and out[0].startswith("api "):
        return out  # hosts and their machine type are each API's own: the move says it all
    compare("machine type", request.machine_type, spec.machine_type or None)
    compare("topology", request.topology, spec.topology or None)
    compare("hosts", request.hosts, spec.hosts or None)
    return out


def reason(found: list[str]) -> str:
    """The replace's reason: ``the file changes api tpu -> compute: replace it``."""
    return f"the file changes {', '.join(found)}: replace it"
