"""``ssh_proxy``: the schema (errors at their line), per-slot resolution, the hop each worker
gets, the OpenSSH command for it, and which names and files are believed."""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path

import pytest

from reconciler.adapters.openssh import ssh_argv
from reconciler.adapters.ssh_proxy import (
    CommandHop,
    JumpHop,
    hop_for,
    iap_argv,
    jump_alias,
    proxy_command,
)
from reconciler.adapters.ssh_routes import SshRoutes
from reconciler.adapters.ssh_values import Worker, workers_of
from reconciler.adapters.worker_names import WorkerNames, from_guest_attributes
from reconciler.core.latency import held_targets
from reconciler.errors import InvalidDesiredState, SetupFailed, UnsafeName
from reconciler.model.load import parse_desired
from reconciler.model.observed import (
    NetworkEndpoint,
    Node,
    NodeState,
    Observation,
)
from reconciler.model.resolved import format_resolved
from reconciler.model.ssh_proxy import DIRECT, JumpHost, SshProxy, expand, parse_jump
from reconciler.runtime import doctor_ssh as ds
from tests.support.worlds import QRState, qr

ZONE = "us-central2-b"


def _file(settings: str = "", slot: str = "", generator: str = "") -> str:
    text = "project: test-project\n"
    if settings:
        text += f"settings:\n  {settings}\n"
    text += f"slots:\n  - name: alpha\n    zone: {ZONE}\n    accelerator: v4-16\n    want: held\n"
    if slot:
        text += f"    {slot}\n"
    text += f"  - name: beta\n    zone: {ZONE}\n    accelerator: v4-8\n    want: held\n"
    if generator:
        text += (
            f"generate:\n  - zones: [{ZONE}]\n    accelerators: {{v4-8: 1}}\n"
            f"    want: held\n    {generator}\n"
        )
    return text


def _errors(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(InvalidDesiredState) as caught:
        parse_desired(text, "d.yaml", env or {})
    return [str(d) for d in caught.value.diagnostics]


# --- the schema ---------------------------------------------------------------------------------


def test_each_form_resolves_per_slot_and_a_slot_overrides_the_settings() -> None:
    d = parse_desired(_file("ssh_proxy: iap", "ssh_proxy: none", "ssh_proxy: {jump: bob@b:2}"))
    assert d.slot("alpha").ssh_proxy == DIRECT  # its own none beats the settings' iap
    assert d.slot("beta").ssh_proxy == SshProxy("iap")
    (generated,) = [s for s in d.slots if s.generated]
    assert generated.ssh_proxy == SshProxy("jump", jump=JumpHost("b", 2, "bob"))
    d = parse_desired(_file(slot='ssh_proxy: {command: [nc, "%h", "%p"]}'))
    assert d.slot("alpha").ssh_proxy == SshProxy("command", command=("nc", "%h", "%p"))
    assert d.slot("beta").ssh_proxy == DIRECT
    assert parse_desired(_file(slot="ssh_proxy: {iap: true}")).slot("alpha").ssh_proxy.kind == "iap"


def test_the_environment_may_say_iap_or_none() -> None:
    env = {"TPU_RECONCILER_SSH_PROXY": "iap"}
    assert parse_desired(_file(), "d.yaml", env).slot("beta").ssh_proxy.kind == "iap"
    assert any(
        "TPU_RECONCILER_SSH_PROXY" in e
        for e in _errors(_file(), {**env, "TPU_RECONCILER_SSH_PROXY": "jump"})
    )


@pytest.mark.parametrize(
    ("line", "where", "says"),
    [
        ("ssh_proxy: ipa", "d.yaml:7:16", "got 'ipa' (did you mean 'iap'?)"),
        ("ssh_proxy: {jump: '-oProxyCommand=x@y'}", "d.yaml:7:23", "is not a user name"),
        ("ssh_proxy: {jump: alice@bad_host}", "d.yaml:7:23", "is not a host name or IP address"),
        ("ssh_proxy: {jump: alice@h:99999}", "d.yaml:7:23", "not a number from 1 to 65535"),
        ("ssh_proxy: {command: [nc, '%h', '%x']}", "d.yaml:7:37", "%x is not a token"),
        ("ssh_proxy: {command: [nc, '%h', 22]}", "d.yaml:7:37", "must be a string"),
        ("ssh_proxy: {command: [nc, \"a\\tb\", '%h']}", "d.yaml:7:31", "control character"),
        ("ssh_proxy: {command: [nc, x]}", "d.yaml:7:16", "must name the worker"),
        ("ssh_proxy: {command: ['-oX', '%h']}", "d.yaml:7:16", "may not start with '-'"),
        ("ssh_proxy: {iap: true, jump: a@b}", "d.yaml:7:16", "give one of iap, jump or command"),
        ("ssh_proxy: {jmup: a@b}", "d.yaml:7:17", "unknown key 'jmup' (did you mean 'jump'?)"),
    ],
)
def test_a_bad_proxy_is_refused_at_its_line(line: str, where: str, says: str) -> None:
    errors = _errors(_file(slot=line))
    assert len(errors) == 1, errors
    assert errors[0].startswith(where) and says in errors[0], errors


def test_validate_resolved_shows_the_proxy_of_every_slot() -> None:
    text = format_resolved(parse_desired(_file("ssh_proxy: iap", "ssh_proxy: {jump: h}")))
    assert "  ssh_proxy: iap\n" in text  # the setting
    assert "    ssh_proxy: {jump: h:22}\n" in text  # alpha's own
    assert text.count("ssh_proxy: iap") == 2  # the setting and beta


def test_jump_hosts_and_tokens() -> None:
    assert parse_jump("bastion.Example.com") == JumpHost("bastion.example.com", 22, None)
    assert parse_jump("a_b@[::1]:2222").text == "a_b@[::1]:2222"
    assert parse_jump("10.0.0.1:22").host == "10.0.0.1"
    for bad in ("a@b@c", "[fe80::zz]", "a b", "h:", ""):
        with pytest.raises(ValueError):
            parse_jump(bad)
    assert (
        expand("%h:%p/%n %%h", {"h": "10.0.0.2", "p": "22", "n": "node"}) == "10.0.0.2:22/node %h"
    )


# --- the hop each worker gets -----------------------------------------------------------------


def test_a_command_gets_its_tokens_and_iap_what_gcloud_runs() -> None:
    proxy = SshProxy("command", command=("/opt/hop", "--to=%h:%p", "%n", "100%%"))
    hop = hop_for(proxy, host="10.0.0.3", port=2222, node="alpha")
    assert hop == CommandHop(("/opt/hop", "--to=10.0.0.3:2222", "alpha", "100%"), "proxy hop")
    iap = hop_for(
        SshProxy("iap"), host="10.0.0.3", port=22, node="alpha", vm="t1v-n-1-w-1",
        zone=ZONE, project="test-project",
    )  # fmt: skip
    assert iap == CommandHop(
        ("gcloud", "compute", "start-iap-tunnel", "t1v-n-1-w-1", "22", "--listen-on-stdin",
         "--project=test-project", f"--zone={ZONE}", "--verbosity=warning"),
        "iap",
    )  # fmt: skip
    with pytest.raises(SetupFailed, match="not known"):
        hop_for(SshProxy("iap"), host="10.0.0.3", port=22, node="alpha", zone=ZONE, project="p")
    for bad_vm in ("-oProxyCommand=x", "a b", "a;b"):
        with pytest.raises(UnsafeName):
            iap_argv(bad_vm, 22, zone=ZONE, project="test-project")
    jump = hop_for(SshProxy("jump", jump=JumpHost("b", 2)), host="10.0.0.3", port=22, node="a")
    assert jump == JumpHop("b", 2, None) and jump_alias(jump) == "jump.b.p2"
    assert jump_alias(JumpHop("::1", 22)) == "jump.ip6-" + "0" * 31 + "1.p22"


def test_the_openssh_command_runs_the_same_hop() -> None:
    common = {"key": "/k/id", "known_hosts": "/s/known_hosts", "port": 22}
    hop = CommandHop(("/opt/my hop", "10.0.0.3", "50%"), "proxy my hop")
    argv = ssh_argv(user="alice", ip="10.0.0.3", instance="alpha@7", hop=hop, **common)  # type: ignore[arg-type]
    option = argv[argv.index("-o", argv.index("IdentitiesOnly=yes")) + 1]
    # quoted for the shell OpenSSH runs it with, every % doubled for its token expansion
    assert option == "ProxyCommand='/opt/my hop' 10.0.0.3 50%%"
    assert shlex.split(option.removeprefix("ProxyCommand=").replace("%%", "%")) == list(hop.argv)
    assert argv[-1] == "alice@10.0.0.3" and "HostKeyAlias=tpu.alpha.7.w0" in argv
    jump = proxy_command(
        JumpHop("bastion", 2222), key="/k/id", known_hosts="/s/kh", worker_host="10.0.0.3",
        worker_port=22, user="alice",
    )  # fmt: skip
    assert jump == (
        "ssh -a -x -i /k/id -o HostKeyAlias=jump.bastion.p2222 -o UserKnownHostsFile=/s/kh "
        "-o StrictHostKeyChecking=accept-new -o IdentitiesOnly=yes -p 2222 -W 10.0.0.3:22 "
        "alice@bastion"
    )
    assert "-A" not in shlex.split(jump)  # the agent goes to the worker, never the jump host
    with pytest.raises(UnsafeName):
        CommandHop(("nc", "a\nb"), "x")


# --- routes, VM names, trust ----------------------------------------------------------------


def _node(name: str = "alpha", workers: int = 2, uid: str = "7") -> Node:
    endpoints = tuple(NetworkEndpoint(f"10.0.0.{i + 2}") for i in range(workers))
    return Node(name, ZONE, NodeState.READY, uid=uid, endpoints=endpoints)


def _rows(node: Node) -> list[dict[str, object]]:
    return [
        {"worker_id": i, "namespace": "guest-agent", "key": k, "value": v}
        for i in range(len(node.endpoints))
        for k, v in (("worker-id", str(i)), ("hostname", f"t1v-n-abc-w-{i}"))
    ]


async def test_iap_names_are_looked_up_once_per_node_instance_and_kept(tmp_path: Path) -> None:
    desired = parse_desired(_file("ssh_proxy: iap"))
    asked: list[tuple[str, str]] = []

    async def lookup(zone: str, node: str) -> list[dict[str, object]]:
        asked.append((zone, node))
        return _rows(_node())

    names = WorkerNames(tmp_path / "worker_names.json", persist=True)
    routes = SshRoutes(desired, names, lookup)
    node = _node()
    workers = await routes.workers(node, "alpha", workers_of(node.ips()))
    assert [w.hop.argv[3] for w in workers if isinstance(w.hop, CommandHop)] == [
        "t1v-n-abc-w-0", "t1v-n-abc-w-1",
    ]  # fmt: skip
    await routes.workers(node, "alpha", workers_of(node.ips()))
    assert asked == [(ZONE, "alpha")]
    assert stat.S_IMODE((tmp_path / "worker_names.json").stat().st_mode) == 0o600
    # another process (ssh, logs) reads them from the file, without a lookup
    again = SshRoutes(desired, WorkerNames(tmp_path / "worker_names.json"))
    (w1,) = again.known_workers(node, "alpha", (Worker(1, "10.0.0.3"),))
    assert isinstance(w1.hop, CommandHop) and w1.hop.argv[3] == "t1v-n-abc-w-1"
    # a re-created node (a new instance) is asked again; so is one missing a worker's name
    with pytest.raises(SetupFailed, match="not known"):
        again.known_workers(_node(uid="8"), "alpha", (Worker(0, "10.0.0.2"),))
    with pytest.raises(SetupFailed, match="worker 2 has no hostname"):
        from_guest_attributes(_rows(_node()), 3)


async def test_a_compute_instance_is_its_own_vm_and_a_direct_slot_has_no_hop() -> None:
    text = _file("ssh_proxy: iap").replace(
        "accelerator: v4-8", "accelerator: v6e-8\n    api: compute"
    )
    desired = parse_desired(text)
    routes = SshRoutes(desired, WorkerNames.nowhere())
    one = _node("beta", workers=1)
    (w,) = await routes.workers(one, "beta", workers_of(one.ips()))
    assert isinstance(w.hop, CommandHop) and w.hop.argv[3] == "beta"
    # a multi-host slice's hosts are the MIG's explicit names, worker order; a multislice
    # slot's slices follow each other
    four = _node("beta", 4)
    hops = [w.hop for w in await routes.workers(four, "beta", workers_of(four.ips()))]
    assert [h.argv[3] for h in hops if isinstance(h, CommandHop)] == [f"beta-{i}" for i in range(4)]
    parts = (_node("beta-0", 2), _node("beta-1", 2))
    multi = Node("beta", ZONE, NodeState.READY, uid="9", slices=parts,
                 endpoints=tuple(e for n in parts for e in n.endpoints))  # fmt: skip
    hops = [w.hop for w in await routes.workers(multi, "beta", workers_of(multi.ips()))]
    assert [h.argv[3] for h in hops if isinstance(h, CommandHop)] == [
        "beta-0-0",
        "beta-0-1",
        "beta-1-0",
        "beta-1-1",
    ]
    direct = SshRoutes(parse_desired(_file()))
    assert all(w.hop is None for w in await direct.workers(one, "beta", workers_of(one.ips())))


def test_a_names_file_someone_else_owns_is_not_believed(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    path = tmp_path / "worker_names.json"
    path.write_text(json.dumps({"alpha@7": ["attacker-vm", "attacker-vm"]}))
    assert WorkerNames(path).known(_node()) == ("attacker-vm", "attacker-vm")  # root's: mine
    os.chown(path, 65534, 65534)
    assert WorkerNames(path).known(_node()) is None


# --- latency and doctor -------------------------------------------------------------------------


def test_a_zone_reached_only_through_a_proxy_is_not_timed() -> None:
    held = qr("alpha", ZONE, QRState.ACTIVE, node_id="alpha")
    node = Node("alpha", ZONE, NodeState.READY, uid="7", endpoints=(NetworkEndpoint("10.9.0.2"),))
    seen = Observation(requests=(held,), nodes=(node,))
    assert set(held_targets(parse_desired(_file()), seen)) == {ZONE}
    assert held_targets(parse_desired(_file(slot="ssh_proxy: iap")), seen) == {}


def test_doctor_names_a_proxy_program_that_is_missing() -> None:
    fine = ds.ProxyFacts("iap", "gcloud", "/usr/bin/gcloud", ("alpha",))
    assert ds.check_ssh_proxy([fine]).detail == "iap (/usr/bin/gcloud) for alpha"
    gone = ds.ProxyFacts("command nc %h %p", "nc", None, ("alpha", "beta"))
    check = ds.check_ssh_proxy([fine, gone])
    assert check.status == "fail" and "nc not found on PATH" in check.detail
    assert "alpha, beta" in check.detail
    jump = ds.ProxyFacts("jump b:22", None, None, ("alpha",))
    assert ds.check_ssh_proxy([jump]).status == "ok"
    failed = ds.check_ssh_reach(
        ["alpha"], ds.ReachFacts("alpha", "w0", "u", "refused", "iap"), None
    )
    assert "35.235.240.0/20" in failed.hint


async def test_a_multislice_slot_names_the_vms_of_every_slice_in_order() -> None:
    slices = (_node("alpha-0", workers=2, uid="1"), _node("alpha-1", workers=2, uid="2"))
    whole = Node("alpha", ZONE, NodeState.READY, uid="1", slices=slices,
                 endpoints=slices[0].endpoints + slices[1].endpoints)  # fmt: skip
    asked: list[str] = []

    async def lookup(zone: str, node: str) -> list[dict[str, object]]:
        asked.append(node)
        return [{"worker_id": i, "key": "hostname", "value": f"{node}-vm-{i}"} for i in range(2)]

    names = await WorkerNames.nowhere().of(whole, lookup)
    assert names == ("alpha-0-vm-0", "alpha-0-vm-1", "alpha-1-vm-0", "alpha-1-vm-1")
    assert asked == ["alpha-0", "alpha-1"]
