"""The value types of desired.yaml's keys, each an ``Annotated`` type carrying its check (a
slot name, a zone, a duration, an IP:port for metrics, ...), so a wrong value is reported at its
own ``file:line:col`` by pydantic, in the project's own words.

Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from reconciler.errors import UnsafeName
from reconciler.model import accelerators, names
from reconciler.model.durations import parse_duration
from reconciler.model.messages import did_you_mean
from reconciler.model.metrics_address import parse_metrics_address
from reconciler.model.ssh_proxy import check_argument, parse_jump
from reconciler.model.times import parse_instant
from reconciler.model.workload import check_env_name, check_secret_name


def _named(check: Any) -> Any:
    def validate(value: Any) -> Any:
        try:
            return check(value)
        except UnsafeName as e:
            raise PydanticCustomError("invalid_name", str(e)) from None

    return AfterValidator(validate)


def _duration(value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError as e:
        raise PydanticCustomError("duration", str(e)) from None


def _instant(value: Any) -> float:
    try:
        return parse_instant(value)
    except ValueError as e:
        raise PydanticCustomError("instant", str(e)) from None


def _family(value: Any) -> str:
    """A family the catalogue knows, as the API spells it (Google's ``v5e`` -> ``v5litepod``)."""
    if not isinstance(value, str) or not names.ACCELERATOR_RE.fullmatch(f"{value}-8"):
        raise PydanticCustomError(
            "family", "expected an accelerator family like v4, v5litepod, v6e or tpu7x"
        )
    gen = accelerators.family_entry(value)
    if gen is None:
        raise PydanticCustomError("family", accelerators.family_problem(value) or "unknown")
    return gen.family


def _accelerator(value: Any) -> str:
    """A name that exists (kept as written: the loader reads aliases and says so)."""
    try:
        written = names.check_accelerator(value)
    except UnsafeName as e:
        raise PydanticCustomError("invalid_name", str(e)) from None
    problem = accelerators.accelerator_problem(written)
    if problem is not None:
        raise PydanticCustomError("catalogue", problem)
    return written


def _machine_type(value: Any) -> str:
    """A Compute Engine TPU machine type of the catalogue (a GKE-only one says so)."""
    try:
        name = names.check_machine_type(value)
    except UnsafeName as e:
        raise PydanticCustomError("invalid_name", str(e)) from None
    if name in accelerators.MACHINE_TYPES:
        return name
    gke = accelerators.GKE_MACHINE_TYPES.get(name)
    if gke is not None:
        gen = accelerators.family_entry(gke)
        title = gen.title if gen is not None else gke
        raise PydanticCustomError(
            "catalogue",
            f"machine type {name!r} is GKE's: Compute Engine does not offer {title}; write "
            f"accelerator: {gke}-N (api: tpu) instead",
        )
    near = did_you_mean(name, list(accelerators.MACHINE_TYPES))
    hint = f" (did you mean {near!r}?)" if near else ""
    raise PydanticCustomError(
        "catalogue",
        f"unknown TPU machine type {name!r}{hint}; Compute Engine's are "
        + ", ".join(accelerators.MACHINE_TYPES),
    )


def _region(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[a-z]+-[a-z]+[0-9]+", value):
        raise PydanticCustomError("region", "expected a region like europe-west4")
    return value


def _safe_text(value: Any) -> str:
    if not isinstance(value, str) or "\x00" in value or "\n" in value:
        raise PydanticCustomError("text", "expected a single-line string")
    return value


def _url(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value):
        raise PydanticCustomError("url", "expected an http:// or https:// URL")
    return value


def _socket_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", value):
        raise PydanticCustomError(
            "socket", "expected a tmux socket name of letters, digits, '_', '.', '-'"
        )
    return value


def _command(value: Any) -> str | list[str]:
    if isinstance(value, str):
        if not value.strip() or "\x00" in value:
            raise PydanticCustomError("command", "expected a non-empty command")
        return value
    if isinstance(value, list) and value:
        if all(isinstance(a, str) and a and "\x00" not in a for a in value):
            return value
        raise PydanticCustomError("command", "every argument must be a non-empty string")
    raise PydanticCustomError(
        "command", "expected a command string (run by bash -lc) or a non-empty argv list"
    )


def _env_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PydanticCustomError(
            "env", "expected a plain string or number (secrets go in secret_env)"
        )
    text = str(value)
    if "\x00" in text:
        raise PydanticCustomError("env", "environment values cannot contain NUL")
    return text


SlotName = Annotated[str, _named(names.check_name)]
ZoneName = Annotated[str, _named(names.check_zone)]
Accelerator = Annotated[str, AfterValidator(_accelerator)]
MachineTypeName = Annotated[str, AfterValidator(_machine_type)]
Topology = Annotated[str, _named(names.check_topology)]
ImageName = Annotated[str, _named(names.check_image)]
RuntimeVersion = Annotated[str, _named(names.check_runtime_version)]
NetworkName = Annotated[str, _named(names.check_network)]
ProjectId = Annotated[str, _named(names.check_project)]
UserName = Annotated[str, _named(names.check_user)]
ZoneCode = Annotated[str, _named(names.check_zone_code)]
Family = Annotated[str, AfterValidator(_family)]
Seconds = Annotated[float, BeforeValidator(_duration)]
Moment = Annotated[float, BeforeValidator(_instant)]
Path = Annotated[str, AfterValidator(_safe_text)]
SocketName = Annotated[str, AfterValidator(_socket_name)]
Url = Annotated[str, AfterValidator(_url)]


def _metrics_address(value: Any) -> str:
    try:
        return str(parse_metrics_address(value))
    except ValueError as e:
        raise PydanticCustomError("metrics_address", str(e)) from None


MetricsSetting = Annotated[str, BeforeValidator(_metrics_address)]
EnvName = Annotated[str, _named(check_env_name)]
SecretName = Annotated[str, _named(check_secret_name)]
EnvValue = Annotated[str, BeforeValidator(_env_value)]
Command = Annotated[str | list[str], BeforeValidator(_command)]


def _checked(kind: str, check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``check``, its ValueError said in the project's words at the value's own line."""

    def validate(value: Any) -> Any:
        try:
            return check(value)
        except ValueError as e:
            raise PydanticCustomError(kind, str(e)) from None

    return validate


JumpHostText = Annotated[str, AfterValidator(_checked("jump", lambda v: parse_jump(v).text))]
ProxyArgument = Annotated[str, AfterValidator(_checked("proxy_argument", check_argument))]
RegionName = Annotated[str, AfterValidator(_region)]
