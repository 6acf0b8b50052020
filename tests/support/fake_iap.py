"""A stand-in for ``gcloud`` on PATH that plays IAP for ``compute start-iap-tunnel`` (a script).

    gcloud compute start-iap-tunnel VM PORT --listen-on-stdin --project=P --zone=Z ...

It does what IAP does with that request: finds the VM by name — the emulator's nodes in that
project and zone, each worker's ``hostname`` guest attribute, as gcloud's ``tpu-vm ssh`` reads
them (``$CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU``, the token in
``$CLOUDSDK_AUTH_ACCESS_TOKEN_FILE``) — and joins stdin/stdout to that worker's *internal*
address and PORT, through the relay gate into the workers' network (``$FAKE_IAP_GATE``, the
gate's port on 127.0.0.1; ``tests/support/relay.py``). Each tunnel is one JSON line in
``$FAKE_IAP_LOG``: its argv and the name of the process that ran it (``ssh`` for OpenSSH's
ProxyCommand, else the controller's interpreter). Any other command runs the real gcloud
(``$FAKE_IAP_REAL_GCLOUD``). No imports of ours: it runs as its own program.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

RELAY = Path(__file__).resolve().with_name("relay.py")


def _call(url: str, body: dict[str, object] | None = None) -> dict[str, object]:
    token = Path(os.environ["CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"]).read_text().strip()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        doc: dict[str, object] = json.loads(answer.read())
        return doc


def _address(vm: str, project: str, zone: str) -> str | None:
    base = os.environ["CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU"]
    nodes = _call(f"{base}v2/projects/{project}/locations/{zone}/nodes").get("nodes") or []
    for node in nodes:  # type: ignore[attr-defined]
        found = _call(f"{base}v2/{node['name']}:getGuestAttributes", {})
        for entry in found.get("guestAttributes") or []:  # type: ignore[attr-defined]
            items = {i["key"]: i["value"] for i in entry["queryValue"]["items"]}
            if items.get("hostname") == vm:
                return str(items["internal-ip"])
    return None


def _parent() -> str:
    try:
        return Path(f"/proc/{os.getppid()}/comm").read_text().strip()
    except OSError:
        return "?"


def main(argv: list[str]) -> None:
    if argv[:2] != ["compute", "start-iap-tunnel"]:
        real = os.environ["FAKE_IAP_REAL_GCLOUD"]
        os.execv(real, [real, *argv])
    vm, port = argv[2], argv[3]
    flags = dict(a.removeprefix("--").split("=", 1) for a in argv[4:] if "=" in a)
    with open(os.environ["FAKE_IAP_LOG"], "a") as log:
        log.write(json.dumps({"argv": ["gcloud", *argv], "by": _parent()}) + "\n")
    address = _address(vm, flags["project"], flags["zone"])
    if address is None:
        sys.stderr.write(f"ERROR: (gcloud.compute.start-iap-tunnel) no instance {vm}\n")
        sys.exit(1)
    gate = ["127.0.0.1", os.environ["FAKE_IAP_GATE"], address, port]
    os.execv(sys.executable, [sys.executable, str(RELAY), "via", *gate])


if __name__ == "__main__":
    main(sys.argv[1:])
