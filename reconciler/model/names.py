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
from reconciler.model import accelerators as catalogue
from reconciler.model.vocabulary import MODE_SHORT

# Cloud resource ids: RFC 1035 labels, as gcloud and the TPU API accept them.
NAME_RE: Final = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
# us-central2-b, europe-west4-a, northamerica-northeast1-a, me-central1-a
ZONE_RE: Final = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
# v4-8, v5litepod-16, v5p-128, v6e-64, v2-8, v3-32, tpu7x-128 (the catalogue's)
ACCELERATOR_RE: Final = catalogue.ACCELERATOR_RE
# GCP project ids: 6-30 chars, lowercase letters, digits, hyphens, start with a letter.
# Legacy "domain.com:project" ids are accepted too.
PROJECT_RE: Final = re.compile(r"^(?:[a-z][-a-z0-9.]{0,61}:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$")
# Runtime versions: tpu-ubuntu2204-base, v2-alpha-tpuv5-lite, tpu-vm-tf-2.16.1-pjrt
RUNTIME_RE: Final = re.compile(r"^[a-z0-9][-a-z0-9._]{0,127}$")
# Compute Engine boot images: projects/P/global/images/NAME or projects/P/global/images/family/F.
IMAGE_RE: Final = re.compile(
    r"^projects/[a-z][-a-z0-9.:]{4,62}[a-z0-9]/global/images/(?:family/)?"
    r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$"
)
# Compute Engine machine types: ct6e-standard-4t, tpu7x-standard-4t.
MACHINE_TYPE_RE: Final = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+){1,3}$")
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
    """Shaped like an accelerator name (whether it exists is ``model/accelerators``')."""
    return _check(
        "accelerator", value, ACCELERATOR_RE, "expected a type like v4-8, v6e-64 or tpu7x-128"
    )


def check_topology(value: object) -> str:
    return _check(
        "topology", value, catalogue.TOPOLOGY_RE, "expected chips per side like 2x4 or 4x4x4"
    )


def check_machine_type(value: object) -> str:
    return _check(
        "machine type", value, MACHINE_TYPE_RE, "expected a machine type like ct6e-standard-4t"
    )


def check_image(value: object) -> str:
    return _check(
        "image",
        value,
        IMAGE_RE,
        "expected projects/PROJECT/global/images/NAME or projects/PROJECT/global/images/family/F",
    )


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
    """``v6e-64`` -> ``v6e``; ``v5litepod-16`` -> ``v5litepod``; Google's ``v5e-8`` ->
    ``v5litepod`` (``model/accelerators.ALIASES``)."""
    family = catalogue.family_of(accelerator)
    if family is None:
        raise UnsafeName(f"invalid accelerator {accelerator!r}")
    return family


def accelerator_size(accelerator: str) -> int:
    parts = catalogue.split(accelerator)
    if parts is None:
        raise UnsafeName(f"invalid accelerator {accelerator!r}")
    return parts[1]


def worker_count(accelerator: str) -> int:
    """Hosts (SSH workers) of a TPU API slice: v4-8 1, v4-32 4, v5litepod-16 4, v6e-8 1,
    v6e-64 16 (``TpuFamily.tpu_api_hosts``; a family the catalogue does not know: its
    number counts chips, one host up to 8, then one per 4)."""
    family, size = accelerator_family(accelerator), accelerator_size(accelerator)
    gen = catalogue.family_entry(family)
    if gen is not None:
        return gen.tpu_api_hosts(gen.chips(size))
    return 1 if size <= 8 else size // 4


def chip_count(accelerator: str) -> int:
    """Chips in a slice: v4-8 4 (its number counts TensorCores), v6e-8 8, v5litepod-16 16,
    tpu7x-128 64 (``TpuFamily.cores_per_chip``; a family not catalogued counts chips)."""
    family, size = accelerator_family(accelerator), accelerator_size(accelerator)
    gen = catalogue.family_entry(family)
    return gen.chips(size) if gen is not None else size


def zone_code(zone: str) -> str:
    """A short code for a zone: us-central2-b -> usc2b, europe-west4-a -> ew4a."""
    region, sub, letter = check_zone(zone).split("-")
    head = region if len(region) <= 2 else region[0]
    digits = "".join(c for c in sub if c.isdigit())
    return f"{head}{sub[0]}{digits}{letter}"


MODE_PREFIX: Final = MODE_SHORT


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
