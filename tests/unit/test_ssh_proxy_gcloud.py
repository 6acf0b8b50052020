"""``ssh_proxy: iap`` runs what gcloud itself runs: the installed SDK's own code builds the
ProxyCommand of ``compute tpus tpu-vm ssh --tunnel-through-iap`` (the worker's VM name from the
node's guest attributes) and of ``compute ssh --tunnel-through-iap`` (an instance's name), and
our argv must be the same command.

The SDK's modules run in a child interpreter (its ``lib`` and ``lib/third_party`` on the path,
a throw-away ``CLOUDSDK_CONFIG``), so none of its vendored packages lands in this process."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from reconciler.adapters.rest import flatten_guest_attributes
from reconciler.adapters.ssh_proxy import iap_argv
from reconciler.adapters.worker_names import from_guest_attributes
from reconciler.emulator._records import NodeRecord, guest_attributes
from tests.support.tools import require_tool

PROJECT = "test-project"
ZONE = "us-central2-b"

_GCLOUD_SIDE = r"""
import json, sys, types
from apitools.base.py import encoding
from googlecloudsdk.calliope import base
from googlecloudsdk.command_lib.compute import iap_tunnel
from googlecloudsdk.command_lib.compute.tpus.tpu_vm import ssh as tpu_ssh
from googlecloudsdk.command_lib.util.ssh import ssh
from googlecloudsdk.generated_clients.apis.tpu.v2 import tpu_v2_messages as m

given = json.loads(sys.argv[1])


class Args:  # ``--tunnel-through-iap`` given, nothing else
    tunnel_through_iap = True
    internal_ip = False
    iap_tunnel_insecure_disable_websocket_cert_check = False

    def IsSpecified(self, name):
        return name == "tunnel_through_iap"

    IsKnownAndSpecified = IsSpecified


env = ssh.Environment(ssh.Suite.OPENSSH)
track = base.ReleaseTrack.GA
response = encoding.JsonToMessage(m.GetGuestAttributesResponse, json.dumps(given["guest"]))
out = {"tpu": [], "vms": []}
for worker in range(given["workers"]):
    vm = tpu_ssh.GetFromGuestAttributes(response.guestAttributes, worker, "hostname")
    out["vms"].append(vm)
    tunnel = tpu_ssh.CreateSshTunnelArgs(
        Args(), track, types.SimpleNamespace(name=given["project"]), given["zone"], vm
    )
    out["tpu"].append(ssh._BuildIapTunnelProxyCommandArgs(tunnel, env))
instance = types.SimpleNamespace(
    project=given["project"], zone=given["zone"], instance=given["instance"]
)
tunnel = iap_tunnel.CreateSshTunnelArgs(Args(), track, instance, None)
out["compute"] = ssh._BuildIapTunnelProxyCommandArgs(tunnel, env)
print(json.dumps(out))
"""


def _gcloud_builds(given: dict[str, object], tmp_path: Path) -> dict[str, list[object]]:
    root = Path(os.path.realpath(require_tool("gcloud"))).parents[1]
    lib = root / "lib"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(lib), str(lib / "third_party"))),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
    }
    done = subprocess.run(
        [sys.executable, "-c", _GCLOUD_SIDE, json.dumps(given)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    built: dict[str, list[object]] = json.loads(done.stdout)
    return built


def _command(options: list[str], port: int) -> list[str]:
    """gcloud's ``-o 'ProxyCommand <python> <gcloud.py> ...' -o ProxyUseFdpass=no`` as the argv
    OpenSSH's shell would run, with ``gcloud`` for the interpreter and script."""
    assert options[0] == "-o" and options[2:] == ["-o", "ProxyUseFdpass=no"], options
    words = shlex.split(options[1].removeprefix("ProxyCommand ").replace("%%", "\0"))
    words = [w.replace("%p", str(port)).replace("\0", "%") for w in words]
    assert Path(words[1]).name == "gcloud.py", words
    return ["gcloud", *words[2:]]


def test_iap_runs_the_command_gcloud_builds_for_tpu_workers_and_instances(
    tmp_path: Path,
) -> None:
    node = NodeRecord(ZONE, "alpha", 7_000_000_000_000_000_123, "alpha", 0.0, "READY")
    node.endpoints = [("10.128.0.3", None), ("10.128.0.4", None)]
    guest = guest_attributes(node, "", [])
    built = _gcloud_builds(
        {"guest": guest, "workers": 2, "project": PROJECT, "zone": ZONE, "instance": "vm-7"},
        tmp_path,
    )
    # the VM names: ours from the flattened rows, gcloud's from its own message class
    ours = from_guest_attributes(flatten_guest_attributes(guest), 2)
    assert list(ours) == built["vms"] and ours[1].endswith("-w-1")
    for worker, options in enumerate(built["tpu"]):
        assert isinstance(options, list)
        expected = _command(options, 22)
        assert list(iap_argv(ours[worker], 22, zone=ZONE, project=PROJECT)) == expected
    compute = built["compute"]
    assert isinstance(compute, list)
    assert list(iap_argv("vm-7", 2222, zone=ZONE, project=PROJECT)) == _command(compute, 2222)
