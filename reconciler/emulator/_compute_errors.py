"""Compute Engine's errors, in its two channels, with the words it uses.

Synchronous refusals are ``ComputeError``s, served as Google's envelope
``{"error": {"code", "message", "errors": [{"domain", "reason", "message"}]}}`` [V shape,
compute-engine.md §2]. Failures found after the request was accepted are ``OpFailure``s: the
operation ends DONE with ``error.errors[]``, ``httpErrorStatusCode`` and
``httpErrorMessage``. Messages name resources with ``PROJECT`` where the project goes; it is
replaced by the project of the request that reads them (the emulator serves one set of
resources under any project id, as the TPU side does).

Values only: no clock, no I/O.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Final

JSON = dict[str, Any]
PROJECT: Final = "{project}"


def named(path: str) -> str:
    """``zones/Z/instances/N`` -> ``projects/{project}/zones/Z/instances/N``."""
    return f"projects/{PROJECT}/{path}"


class ComputeError(Exception):
    """A request Compute Engine refuses before accepting it."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def body(self, project: str) -> JSON:
        message = self.message.replace(PROJECT, project)
        error = {"domain": "global", "reason": self.reason, "message": message}
        return {"error": {"code": self.code, "message": message, "errors": [error]}}


def not_found(path: str) -> ComputeError:
    """[V pattern: SKY matches ``The resource 'projects/.*/zones/.*/...' was not found``]"""
    return ComputeError(404, "notFound", f"The resource '{named(path)}' was not found")


def already_exists(path: str) -> ComputeError:
    """[V reason: CT tests ``reason == "alreadyExists"``; I the words]"""
    return ComputeError(409, "alreadyExists", f"The resource '{named(path)}' already exists")


def invalid(message: str) -> ComputeError:
    return ComputeError(400, "invalid", message)


def bad_field(field_path: str, value: object, why: str = "") -> ComputeError:
    """``Invalid value for field 'resource.x': 'v'. why`` [I: Compute Engine's usual form]."""
    text = f"Invalid value for field '{field_path}': '{value}'."
    return invalid(f"{text} {why}" if why else text)


def in_use(kind: str, path: str, user: str) -> ComputeError:
    """A resource another one still refers to [I]."""
    return ComputeError(
        400,
        "resourceInUseByAnotherResource",
        f"The {kind} resource '{named(path)}' is already being used by '{named(user)}'",
    )


def not_allowed_machine_type(name: str) -> ComputeError:
    """A TPU machine type without a Compute Engine path (v5e) [3P: the words and 403]."""
    return ComputeError(
        403, "forbidden", f"This user agent is not allowed to use the machine type [{name}]."
    )


def placement_policy_refused(machine_type: str) -> ComputeError:
    """[V verbatim, vllm-project/ci-infra #547]"""
    return invalid(
        f"Creation of a managed instance group with {machine_type} machine type with "
        "placement policy is not supported. Use workload policy instead."
    )


def topology_required(machine_type: str) -> ComputeError:
    """A TPU7x workload policy without ``acceleratorTopology`` [3P: the words after the
    machine type; I the beginning]."""
    return invalid(
        f"Machine type {machine_type} does not support TPU topology with group placement "
        "policy and workload policy at the same time."
    )


def fingerprint_mismatch() -> ComputeError:
    """``setMetadata`` with a stale or missing fingerprint [V: 412 conditionNotMet, SDK doc]."""
    return ComputeError(
        412,
        "conditionNotMet",
        "Supplied fingerprint does not match current metadata fingerprint.",
    )


@dataclass
class OpFailure:
    """What a failed operation carries: ``error.errors[]`` and the HTTP status it stands for."""

    http_status: int
    http_message: str
    errors: list[JSON] = field(default_factory=list)

    def render(self, project: str) -> JSON:
        errors = copy.deepcopy(self.errors)
        for e in errors:
            e["message"] = str(e.get("message", "")).replace(PROJECT, project)
        return {
            "error": {"errors": errors},
            "httpErrorStatusCode": self.http_status,
            "httpErrorMessage": self.http_message,
        }

    @property
    def code(self) -> str:
        return str(self.errors[0].get("code", "")) if self.errors else ""


def stockout(zone: str) -> OpFailure:
    """No capacity in the zone [3P: the code; brief: the words; I: 503]."""
    return OpFailure(
        503,
        "SERVICE UNAVAILABLE",
        [
            {
                "code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                "message": f"The zone '{named('zones/' + zone)}' does not have enough resources "
                "available to fulfill the request. Try a different zone, or try again later.",
            }
        ],
    )


def quota_exceeded(
    quota: str, metric: str, limit_name: str, limit: int, region: str, dimensions: dict[str, str]
) -> OpFailure:
    """``QUOTA_EXCEEDED`` with its ``quotaInfo`` [V: the code and QuotaExceededInfo; 3P: the
    words; I: 403]."""
    info = {
        "metricName": metric,
        "limitName": limit_name,
        "limit": float(limit),
        "dimensions": dict(dimensions),
    }
    return OpFailure(
        403,
        "FORBIDDEN",
        [
            {
                "code": "QUOTA_EXCEEDED",
                "message": f"Quota '{quota}' exceeded. Limit: {float(limit)} in region {region}.",
                "errorDetails": [{"quotaInfo": info}],
            }
        ],
    )


def failure(code: str, message: str, http_status: int = 400) -> OpFailure:
    """Any other asynchronous failure (an injected one, a cancelled insert)."""
    words = {
        400: "BAD REQUEST",
        403: "FORBIDDEN",
        404: "NOT FOUND",
        409: "CONFLICT",
        412: "PRECONDITION FAILED",
        429: "TOO MANY REQUESTS",
        500: "INTERNAL SERVER ERROR",
        503: "SERVICE UNAVAILABLE",
    }
    return OpFailure(
        http_status, words.get(http_status, "ERROR"), [{"code": code, "message": message}]
    )
