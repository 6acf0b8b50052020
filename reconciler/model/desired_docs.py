"""Descriptions of desired.yaml's keys that several blocks share (slots, generators, race
groups), kept apart from the schema in ``model/desired_schema.py`` that uses them; each is a
``Field(description=...)`` there, and ``scripts/gen_reference.py`` prints it in
docs/desired-reference.md.

Values only.
"""

from __future__ import annotations

from typing import Final

#: What ``owner:`` means on a slot and a race group (set by intent edits; see docs/security.md).
OWNER: Final = (
    "Unix user who holds it (set by intent edits from the user running them); "
    "else its race group's, else its generator's."
)

#: The time and pause keys, shared by slots, generators and race groups.
HOLD: Final = {
    "start_at": "Queue now, provision no earlier than this time (ISO 8601 with offset).",
    "start_after": "Queue now, provision no earlier than this long after each create.",
    "hold_for": "Release once the node has been ACTIVE this long (per node instance).",
    "hold_until": "Release at this time (ISO 8601 with offset).",
    "paused": "Nothing is created, deleted or set up for it; what it holds stays held.",
}

#: The flex-start keys, shared by slots and generators.
FLEX: Final = {
    "max_run_duration": "mode flex-start only (required there): how long the TPU runs once "
    "provisioned, at most 7d; then the cloud deletes it and the slot reads expired.",
    "renew": "mode flex-start only: queue again once each run has ended (default false: an "
    "expired run stays expired).",
}

SLICES: Final = (
    "Slices of this accelerator in one queued resource (multislice, nodes <slot>-0 ... "
    "<slot>-N-1); the slot is ACTIVE when every slice is READY."
)

#: The keys that say what a slot is and which API holds it (``model/load_shape.py``).
SLOT: Final = {
    "accelerator": "Accelerator type as users name it: v4-8, v5litepod-16, v6e-64, tpu7x-128 "
    "(Google's v5e-8 is read as v5litepod-8); or machine_type and topology. Required unless "
    "machine_type is given.",
    "machine_type": "Compute Engine machine type (ct6e-standard-4t, ct5p-hightpu-4t, "
    "tpu7x-standard-4t), with topology: another way to say accelerator (api: compute).",
    "topology": "Chips per side, 2x4 or 4x4x4: with machine_type it says the size; with "
    "accelerator (api: compute) it picks a shape other than the default.",
    "api": "tpu (the Cloud TPU API's queued resources) or compute (Compute Engine instances "
    "and MIGs); else settings.apis by family, else compute for tpu7x and tpu for the rest.",
    "runtime_version": "api: tpu only: runtime (software) version; else "
    "settings.runtime_versions by family.",
    "image": "api: compute only: boot image, projects/P/global/images/[family/]NAME; else "
    "settings.images by family, else the accelerator image of the generation.",
}

#: ``ssh_proxy`` (settings, slots, generators) and its keys (``model/ssh_proxy.py``).
PROXY: Final = {
    "settings": "How SSH reaches the workers when they cannot be dialled (no external IP, "
    "controller outside the VPC): iap, {jump: user@host[:port]}, {command: [...]} or none "
    "(direct, the default); every SSH use goes through it. See docs/operations.md.",
    "slot": "As settings.ssh_proxy, for this slot only (none: dial it directly).",
    "iap": "Tunnel to each worker's VM through Identity-Aware Proxy, as `gcloud compute "
    "start-iap-tunnel VM PORT --listen-on-stdin --project P --zone Z` (the string iap is "
    "short for this).",
    "jump": "user@host[:port] of an SSH jump host (OpenSSH's ProxyJump); the user defaults to "
    "the workers' SSH user, its host key is pinned like theirs.",
    "command": "A program and its arguments (a list, never a shell string) that relays its "
    "stdin/stdout to the worker: %h its address, %p the SSH port, %n the node's name, %% a %.",
    "forms": "expected iap, none, {jump: user@host[:port]} or {command: [program, args...]}",
}
