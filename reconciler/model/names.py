"""Validation of every name that can reach gcloud, SSH or tmux.

A name that passes these checks contains only ``[a-z0-9-]`` (zones and accelerators) or a
conservative label/host alphabet, can never start with ``-`` (so it cannot be read as an
option) and never contains shell, tmux-target or path metacharacters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from reconciler.errors import UnsafeName

# Cloud resource ids: RFC 1035 labels, as gcloud and the TPU API accept them.
NAME_RE: Final = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
# us-central2-b, europe-west4-a, northamerica-northeast1-a, me-central1-a
ZONE_RE: Final = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
# v4-8, v5litepod-16, v5p-128, v6e-64, v2-8, v3-32
ACCELERATOR_RE: Final = re.compile(r"^(v[0-9][a-z0-9]*)-([1-9][0-9]{0,4})$")
# GCP project ids: 6-30 chars, lowercase letters, digits, hyphens, start with a letter.
# Legacy "domain.com:project" ids are accepted too.
PROJECT_RE: Final = re.compile(r"^(?:[a-z][-a-z0-9.]{0,61}:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$")
# Runtime versions: tpu-ubuntu2204-base, v2-alpha-tpuv5-lite, tpu-vm-tf-2.16.1-pjrt
RUNTIME_RE: Final = re.compile(r"^[a-z0-9][-a-z0-9._]{0,127}$")
# Networks and subnetworks: a short name or a full resource path.
NETWORK_RE: Final = re.compile(r"^[a-z0-9][-a-z0-9_/.]{0,254}$")
# POSIX-ish user names for SSH (OS Login names look like alice_example_com).
USER_RE: Final = re.compile(r"^[a-z_][a-z0-9_.-]{0,63}$")
ZONE_CODE_RE: Final = re.compile(r"^[a-z0-9]{1,16}$")
# GCP labels: keys start with a letter; both at most 63 of [a-z0-9_-].
LABEL_KEY_RE: Final = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE: Final = re.compile(r"^[a-z0-9_-]{0,63}$")
# Guest-attribute query paths: "namespace/" or "namespace/key".
QUERY_PATH_RE: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}/(?:[A-Za-z0-9_.-]{1,127})?$")


def _check(kind: str, value: object, pattern: re.Pattern[str], rule: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise UnsafeName(f"invalid {kind} {value!r}: {rule}")
    return value


def check_name(value: object) -> str:
    """A slot / queued-resource / node / race-group name."""
    return _check(
        "name",
        value,
        NAME_RE,
        "use lowercase letters, digits and hyphens, start with a letter, "
        "end with a letter or digit, at most 63 characters",
    )


def check_zone(value: object) -> str:
    return _check("zone", value, ZONE_RE, "expected a zone like us-central2-b")


def check_accelerator(value: object) -> str:
    return _check("accelerator", value, ACCELERATOR_RE, "expected a type like v4-8 or v6e-64")


def check_project(value: object) -> str:
    return _check("project", value, PROJECT_RE, "expected a GCP project id like my-project-123")


def check_runtime_version(value: object) -> str:
    return _check(
        "runtime version", value, RUNTIME_RE, "expected a version like tpu-ubuntu2204-base"
    )


def check_network(value: object) -> str:
    return _check("network", value, NETWORK_RE, "expected a network or subnetwork name")


def check_user(value: object) -> str:
    return _check("user name", value, USER_RE, "expected a POSIX user name")


def check_zone_code(value: object) -> str:
    return _check("zone code", value, ZONE_CODE_RE, "expected 1-16 lowercase letters or digits")


def check_labels(labels: Mapping[str, str]) -> Mapping[str, str]:
    """Labels GCP would accept; UnsafeName names the first key or value it would refuse."""
    for key, value in labels.items():
        _check(
            "label key",
            key,
            LABEL_KEY_RE,
            "lowercase letters, digits, _ and -, starting with a letter, at most 63",
        )
        _check(
            "label value", value, LABEL_VALUE_RE, "lowercase letters, digits, _ and -, at most 63"
        )
    return labels


def check_query_path(value: object) -> str:
    return _check(
        "guest attribute query path", value, QUERY_PATH_RE, "expected namespace/ or namespace/key"
    )


def accelerator_family(accelerator: str) -> str:
    """``v6e-64`` -> ``v6e``; ``v5litepod-16`` -> ``v5litepod``."""
    m = ACCELERATOR_RE.fullmatch(accelerator)
    if not m:
        raise UnsafeName(f"invalid accelerator {accelerator!r}")
    return m.group(1)


def accelerator_size(accelerator: str) -> int:
    m = ACCELERATOR_RE.fullmatch(accelerator)
    if not m:
        raise UnsafeName(f"invalid accelerator {accelerator!r}")
    return int(m.group(2))


# Families whose suffix counts TensorCores (2 per chip, 4 chips per host -> 8 per host);
# the others count chips (4 per host on multi-host slices, up to 8 on one host).
_CORE_COUNTED: Final = frozenset({"v2", "v3", "v4", "v5p"})


def worker_count(accelerator: str) -> int:
    """Hosts (SSH workers) in a slice: v4-8 1, v4-32 4, v5litepod-16 4, v6e-8 1, v6e-64 16."""
    family, size = accelerator_family(accelerator), accelerator_size(accelerator)
    if family in _CORE_COUNTED:
        return max(1, size // 8)
    return 1 if size <= 8 else size // 4


def chip_count(accelerator: str) -> int:
    """Chips in a slice: v4-8 4 (its suffix counts TensorCores), v6e-8 8, v5litepod-16 16."""
    family, size = accelerator_family(accelerator), accelerator_size(accelerator)
    return max(1, size // 2) if family in _CORE_COUNTED else size


def zone_code(zone: str) -> str:
    """A short code for a zone: us-central2-b -> usc2b, europe-west4-a -> ew4a."""
    region, sub, letter = check_zone(zone).split("-")
    head = region if len(region) <= 2 else region[0]
    digits = "".join(c for c in sub if c.isdigit())
    return f"{head}{sub[0]}{digits}{letter}"


MODE_PREFIX: Final = {"spot": "spot", "on-demand": "od", "reserved": "res", "flex-start": "flex"}


def slot_name(mode: str, accelerator: str, code: str, index: int) -> str:
    """The naming convention for generated slots: spot-v6e8-ew4a-1."""
    return check_name(f"{MODE_PREFIX[mode]}-{accelerator.replace('-', '')}-{code}-{index}")


def host_key_alias(instance: str, worker: int) -> str:
    """The known_hosts name pinning one worker of one node *instance*.

    ``instance`` is ``Node.instance`` (``name@uid``): a re-created node gets a new alias and so
    a fresh trust-on-first-use entry, while a changed key for the same instance is refused.
    Used by both asyncssh (bootstrap) and OpenSSH (``-o HostKeyAlias=``, tmux windows).
    """
    name, _, uid = instance.partition("@")
    check_name(name)
    tag = re.sub(r"[^a-z0-9]", "", uid.lower())[:24] or "0"
    return f"tpu.{name}.{tag}.w{int(worker)}"
