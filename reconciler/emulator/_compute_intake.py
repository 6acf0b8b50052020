"""Reading a Compute Engine request body: durations, the machine type, and the scheduling
(provisioning model and termination action), refusing what the service refuses.

Pure validation: no clock, no I/O. Refusals are ``ComputeError``s in Google's words (tagged
[V] / [3P] / [I] as docs/emulator.md explains).
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._compute_catalog import (
    MACHINE_TYPES,
    REFUSED_PREFIXES,
    MachineType,
    relative,
)

MODELS = ("STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND")


def duration(value: Any, field: str) -> float:
    """A ``Duration`` JSON (``{"seconds": "3600", "nanos": 0}``) in seconds."""
    if not isinstance(value, dict):
        raise err.bad_field(field, value)
    try:
        return int(value.get("seconds") or 0) + int(value.get("nanos") or 0) / 1e9
    except (TypeError, ValueError):
        raise err.bad_field(field, value) from None


def machine_type(zone: str | None, value: str, *, field: str = "machine_type") -> MachineType:
    """The catalogue entry an instance's ``machineType`` names (``zones/Z/machineTypes/MT``,
    a full link, or a bare name, as a template gives it); ``zone`` None: any zone."""
    path = relative(value)
    m = re.fullmatch(r"(?:zones/([^/]+)/machineTypes/)?([^/]+)", path)
    if m is None or (m.group(1) is not None and zone is not None and m.group(1) != zone):
        raise err.bad_field(field, value, "Invalid machine type URL for this zone.")
    name = m.group(2)
    if name.startswith(REFUSED_PREFIXES):
        raise err.not_allowed_machine_type(name)
    found = MACHINE_TYPES.get(name)
    if found is None:
        where = f"zone '{zone}'" if zone else "any zone"
        raise err.bad_field(
            field, value, f"Machine type with name '{name}' does not exist in {where}."
        )
    return found


def scheduling(body: dict[str, Any], field: str = "resource.scheduling") -> tuple[str, str]:
    """(provisioning model, termination action) of an Instance or InstanceProperties, refusing
    the combinations the service refuses [V: the enums; 3P: FLEX_START's companions; I: the
    words]."""
    sched = body.get("scheduling") or {}
    model = sched.get("provisioningModel") or ("SPOT" if sched.get("preemptible") else "STANDARD")
    if model not in MODELS:
        raise err.bad_field(f"{field}.provisioningModel", model)
    if sched.get("onHostMaintenance") == "MIGRATE":
        raise err.bad_field(
            f"{field}.onHostMaintenance",
            "MIGRATE",
            "Instances with TPU machine types do not support live migration.",
        )
    params = body.get("params") or {}
    if params.get("requestValidForDuration") is not None and model != "FLEX_START":
        raise err.bad_field(
            "resource.params.requestValidForDuration",
            "set",
            "It is allowed only with the FLEX_START provisioning model.",
        )
    if model == "FLEX_START" and sched.get("maxRunDuration") is None:
        raise err.bad_field(
            f"{field}.maxRunDuration", "", "FLEX_START instances need a maximum run duration."
        )
    if model == "RESERVATION_BOUND":
        affinity = body.get("reservationAffinity") or {}
        if affinity.get("consumeReservationType") != "SPECIFIC_RESERVATION":
            raise err.bad_field(
                "resource.reservationAffinity.consumeReservationType",
                affinity.get("consumeReservationType", ""),
                "RESERVATION_BOUND needs a SPECIFIC_RESERVATION.",
            )
    return model, str(sched.get("instanceTerminationAction") or "STOP")
