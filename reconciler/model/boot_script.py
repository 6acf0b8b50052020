"""``setup.at_boot``: the setup scripts as one startup script, and what it reports back.

``startup_script(slot, generation, scripts)`` is the text a node's ``startup-script`` metadata
carries (both APIs run it as root on every boot of every worker VM): each setup script,
gzipped and base64-encoded, is unpacked into a fresh private directory and run in order, as
bootstrap runs them over SSH (``TPU_RECONCILER_WORKER`` set, a shebang honoured; the first
failure stops that worker), with ``TPU_RECONCILER_AT_BOOT=1`` and its output in
``/var/log/tpu-reconciler-boot.log``. Its first lines name it: ``TAG`` with the slot and the
generation, which is how the controller tells which setup a node boots with
(``boot_generation``).

Each worker says how far it got in its guest attribute ``tpu-reconciler/setup`` (``QUERY``),
through the metadata server, and in ``/run/tpu-reconciler/boot-setup`` (this boot's, readable
by anyone on the worker): ``g<generation> running <n>/<total> <script>``, ``g<generation>
done`` or ``g<generation> failed <script> exit <code>`` (``parse_report``). The worker's index
is the ``tpu-worker-id`` metadata attribute where the API's adapter sets one (every Compute
Engine VM: ``adapters/compute_body``), else the TPU VM's ``agent-worker-number``, else 0.

Nothing secret goes in: the Tailscale key and workload secrets reach a worker over SSH only.
The scripts' text itself is readable by anyone who can read the node's metadata.

Pure: bytes in, text out.
"""

from __future__ import annotations

import base64
import gzip
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: The metadata keys a create with a boot script sets (guest attributes must be enabled for a
#: VM to write one: Compute Engine's rule; harmless on a TPU VM, where they already are).
STARTUP_KEY: Final = "startup-script"
GUEST_KEY: Final = "enable-guest-attributes"
GUEST_VALUE: Final = "TRUE"
#: The guest attribute each worker reports in: ``<namespace>/<key>``.
NAMESPACE: Final = "tpu-reconciler"
KEY: Final = "setup"
QUERY: Final = f"{NAMESPACE}/"
#: Metadata values are limited to 256 KB each (Compute Engine's and the TPU API's rule).
MAX_BYTES: Final = 256 * 1024
#: The script's first comment line: ``# tpu-reconciler boot setup: slot=NAME generation=N``.
TAG: Final = "# tpu-reconciler boot setup:"
_TAG_RE: Final = re.compile(r"^# tpu-reconciler boot setup: slot=\S+ generation=([0-9]{1,7})\b")
_NAME_RE: Final = re.compile(r"[0-9]{2}-[A-Za-z0-9._-]{1,80}")
_REPORT_RE: Final = re.compile(r"g([0-9]{1,7}) (running|done|failed)(?: (.{0,200}))?")
_EOF: Final = "TPU_RECONCILER_EOF"


def boot_metadata(script: str | None) -> dict[str, str]:
    """A VM's metadata for ``script`` (both APIs): empty without one (as gcloud sends it), or
    the ``startup-script`` and ``enable-guest-attributes`` (each worker reports there)."""
    if script is None:
        return {}
    return {GUEST_KEY: GUEST_VALUE, STARTUP_KEY: script}


class BootScriptTooLarge(ValueError):
    """The scripts do not fit in one metadata value."""


_HEAD: Final = """\
#!/bin/bash
{tag} slot={slot} generation={generation}
# Written by tpu-reconciler (setup.at_boot: true): runs the setup scripts {names}
# on every boot of every worker, as root, and reports in the guest attribute
# tpu-reconciler/setup. Its output: /var/log/tpu-reconciler-boot.log.
set -u
umask 077
gen={generation}
total={total}
md=${{TPU_RECONCILER_METADATA:-http://metadata.google.internal/computeMetadata/v1}}
attr() {{ curl -fsS -m 10 -H Metadata-Flavor:Google "$md/instance/attributes/$1" 2>/dev/null; }}
state=${{TPU_RECONCILER_BOOT_STATE:-/run/tpu-reconciler/boot-setup}}
report() {{
    (umask 022 && mkdir -p "${{state%/*}}" && echo "g$gen $*" >"$state.tmp" &&
        mv -f "$state.tmp" "$state")
    curl -fsS -m 10 -X PUT -H Metadata-Flavor:Google --data-binary "g$gen $*" \\
        "$md/instance/guest-attributes/tpu-reconciler/setup" >/dev/null 2>&1 || true
}}
worker=$(attr tpu-worker-id || attr agent-worker-number || echo 0)
[[ $worker =~ ^[0-9]{{1,6}}$ ]] || worker=0
log=${{TPU_RECONCILER_BOOT_LOG:-/var/log/tpu-reconciler-boot.log}}
exec >>"$log" 2>&1
echo "tpu-reconciler boot setup generation $gen on worker $worker: $(date -u +%FT%TZ)"
report running 0/$total
dir=$(mktemp -d /tmp/tpu-reconciler-boot.XXXXXX) || {{ report failed unpack; exit 1; }}
trap 'rm -rf -- "$dir"' EXIT
unpack() {{ base64 -d | gunzip >"$dir/$1" && chmod 700 "$dir/$1"; }}
"""

_RUN: Final = """\
n=0
for s in {names}; do
    n=$((n + 1))
    report running $n/$total "$s"
    echo "[$n/$total] $s"
    (cd / && TPU_RECONCILER_WORKER=$worker TPU_RECONCILER_AT_BOOT=1 exec "$dir/$s")
    code=$?
    if [ "$code" -ne 0 ]; then
        echo "$s exited $code"
        report failed "$s exit $code"
        exit 1
    fi
done
echo "boot setup done"
report done
"""


def startup_script(slot: str, generation: int, scripts: Sequence[tuple[str, bytes]]) -> str:
    """The startup script running ``scripts`` (``(name, content)``, names as bootstrap
    uploads them: ``01-setup.sh``) in order. Raises ``BootScriptTooLarge`` past ``MAX_BYTES``
    and ValueError for a name bootstrap would not have made."""
    names = [name for name, _ in scripts]
    for name in names:
        if not _NAME_RE.fullmatch(name):
            raise ValueError(f"invalid boot script name {name!r}")
    parts = [
        _HEAD.format(
            tag=TAG,
            slot=slot,
            generation=int(generation),
            total=len(scripts),
            names=", ".join(names) or "(none)",
        )
    ]
    for name, content in scripts:
        packed = base64.encodebytes(gzip.compress(content, mtime=0)).decode("ascii")
        parts.append(f"unpack {name} <<'{_EOF}' || {{ report failed unpack; exit 1; }}\n")
        parts.append(f"{packed}{_EOF}\n")
    parts.append(_RUN.format(names=" ".join(names)))
    text = "".join(parts)
    size = len(text.encode())
    if size > MAX_BYTES:
        raise BootScriptTooLarge(
            f"the setup scripts make a {size // 1024} KiB startup script; metadata holds "
            f"{MAX_BYTES // 1024} KiB: make them smaller (fetch the large parts from storage), "
            "or run them over SSH (setup.at_boot: false)"
        )
    return text


def boot_generation(script: str | None) -> int | None:
    """The setup generation a node's startup script runs (None: not one of ours)."""
    if not script:
        return None
    first = script.split("\n", 2)[1] if script.startswith("#!") else script.split("\n", 1)[0]
    m = _TAG_RE.match(first)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class BootReport:
    """One worker's ``tpu-reconciler/setup`` guest attribute."""

    generation: int
    state: str  # running | done | failed
    detail: str = ""


def parse_report(value: object) -> BootReport | None:
    """A worker's report, or None when it is not one (unknown, never a failure)."""
    if not isinstance(value, str):
        return None
    m = _REPORT_RE.fullmatch(value.strip())
    if m is None:
        return None
    detail = "".join(c if c.isprintable() else "?" for c in (m.group(3) or ""))
    return BootReport(int(m.group(1)), m.group(2), detail)
