"""``doctor``'s SSH checks: what every setup step and every workload needs to reach its workers.

Anything the controller does on a node goes over SSH: ``setup.bootstrap``, ``setup.tailscale``,
the ``setup.tmux`` window, a slot's ``workload:`` and a race group's ``workload.across: group``.
So when one of those is asked for, three things must hold, and each is a check:

- ``ssh_key``: the private key (``settings.ssh_key``, else ``~/.ssh/google_compute_engine``)
  exists and can be used: readable, and when it has a passphrase an agent holds keys;
- ``oslogin_user`` (in ``doctor``): the user to log in as;
- ``ssh_reach``: one worker of one live node accepts that key as that user (one login that runs
  ``true``), when the controller's snapshot shows a live node with real addresses — through
  that slot's ``ssh_proxy`` when it has one;
- ``ssh_proxy`` (only when such a slot has one): the program each proxy runs is on ``PATH``
  (``gcloud`` for ``iap``, the command's program; a jump host needs none).

A key that exists is still useless until the TPU VMs know it: ``KEY_HELP`` says how to create
one and register it (OS Login, or the project's metadata), as docs/operations.md does.

Pure like ``runtime.doctor``: the facts come from ``runtime.doctor_probes``. May: compute.
May not: do I/O, print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from reconciler.model.desired import Desired
from reconciler.runtime.doctor import AgentFacts, Check, ok, skip

#: How to make and register the key a real TPU VM accepts (the fix of ``ssh_key``/``ssh_reach``).
KEY_HELP: Final = (
    "create a key: ssh-keygen -t ed25519 -f ~/.ssh/google_compute_engine; register it with OS "
    "Login: gcloud compute os-login ssh-keys add --key-file ~/.ssh/google_compute_engine.pub "
    "(or once: gcloud compute tpus tpu-vm ssh NODE --zone ZONE, which also adds it to the "
    "project's metadata where OS Login is off); docs/operations.md#ssh-keys"
)


def ssh_slots(desired: Desired | None) -> tuple[str, ...] | None:
    """The slots the controller reaches over SSH (setup steps, a workload, a race group's one
    program across its winners), in file order; None when the file is invalid."""
    if desired is None:
        return None
    across = {c for g in desired.race_groups if g.workload is not None for c in g.slots}
    return tuple(
        s.name
        for s in desired.slots
        if s.setup.bootstrap
        or s.setup.tmux
        or s.setup.tailscale
        or s.workload is not None
        or s.name in across
    )


def _names(slots: Sequence[str]) -> str:
    return ", ".join(slots[:3]) + (f" and {len(slots) - 3} more" if len(slots) > 3 else "")


@dataclass(frozen=True, slots=True)
class KeyFacts:
    """The private key SSH would use: ``problem`` is why it cannot be loaded (None: it can,
    or it has a passphrase: ``encrypted``); ``public`` whether ``<key>.pub`` is beside it."""

    path: str
    exists: bool
    encrypted: bool = False
    public: bool = False
    problem: str | None = None


def check_ssh_key(
    needed_by: Sequence[str] | None, facts: KeyFacts | None, agent: AgentFacts | None
) -> Check:
    if needed_by is None:
        return skip("ssh_key", "desired.yaml is invalid (see desired)")
    if not needed_by or facts is None:
        return skip("ssh_key", "nothing reaches a node over SSH (no setup step, no workload)")
    who = f"SSH to the workers of {_names(needed_by)}"
    if not facts.exists:
        return Check("ssh_key", "fail", f"{facts.path} not found; {who} needs it", KEY_HELP)
    if facts.problem:
        return Check(
            "ssh_key",
            "fail",
            f"{facts.path} cannot be used: {facts.problem}",
            f"check its permissions and format (ssh-keygen -y -f {facts.path}), or {KEY_HELP}",
        )
    if facts.encrypted and (agent is None or not agent.socket or agent.keys == 0):
        return Check(
            "ssh_key",
            "fail",
            f"{facts.path} has a passphrase and no SSH agent holds a key; {who} cannot use it",
            f"ssh-add {facts.path} in an agent the controller sees (SSH_AUTH_SOCK; under "
            "systemd see docs/operations.md)",
        )
    how = " (passphrase: through the agent)" if facts.encrypted else ""
    missing_pub = "" if facts.public else f"; no {facts.path}.pub beside it (to register it)"
    return ok("ssh_key", f"{facts.path}{how}{missing_pub}")


@dataclass(frozen=True, slots=True)
class ReachFacts:
    """One login to one worker of a live node (``error`` None: it worked); ``proxy`` the
    slot's ``ssh_proxy`` kind when it went through one."""

    slot: str
    worker: str  # "worker 0 of name@uid (10.0.0.2:22)"
    user: str
    error: str | None = None
    proxy: str | None = None


#: What to check when a login through a proxy fails, per kind.
PROXY_HELP: Final = {
    "iap": "IAP needs a firewall rule letting 35.235.240.0/20 reach tcp:22 on the TPU's "
    "network and roles/iap.tunnelResourceAccessor for you; docs/operations.md#ssh-through-iap",
    "jump": "check that the jump host accepts your key as that user and may reach the "
    "workers (AllowTcpForwarding); docs/operations.md#ssh-through-a-jump-host",
    "command": "run the proxy command by hand with the worker's address and port: it must "
    "relay its stdin and stdout to the worker's sshd",
}


@dataclass(frozen=True, slots=True)
class ProxyFacts:
    """One proxy the SSH slots use: ``program`` the one it runs (None: a jump host, nothing
    local), ``found`` where ``PATH`` has it (None: not found), ``slots`` who use it."""

    text: str  # "iap", "jump alice@bastion:22", "command nc %h %p"
    program: str | None
    found: str | None
    slots: tuple[str, ...]


def check_ssh_proxy(facts: Sequence[ProxyFacts]) -> Check:
    """Every proxy's program is there (only called when some SSH slot has a proxy)."""
    missing = [f for f in facts if f.program is not None and f.found is None]
    if missing:
        first = missing[0]
        return Check(
            "ssh_proxy",
            "fail",
            f"{first.program} not found on PATH; ssh_proxy {first.text} of "
            f"{_names(first.slots)} runs it",
            "install it (gcloud: the Google Cloud SDK) or put its directory on the "
            "controller's PATH (a systemd unit's PATH: tpu-reconciler service install)",
        )
    shown = "; ".join(
        f"{f.text}" + (f" ({f.found})" if f.found else "") + f" for {_names(f.slots)}"
        for f in facts
    )
    return ok("ssh_proxy", shown)


#: ``ssh_reach`` when nothing was dialled, and why.
NO_LIVE_NODE: Final = "no live node in the controller's snapshot to try"
EMULATED: Final = "the live nodes are emulated (documentation addresses): nothing to dial"


def check_ssh_reach(
    needed_by: Sequence[str] | None, facts: ReachFacts | None, not_tried: str | None
) -> Check:
    """``not_tried`` says why no login was tried (a failed check it needs, or no live node)."""
    if needed_by is None:
        return skip("ssh_reach", "desired.yaml is invalid (see desired)")
    if not needed_by:
        return skip("ssh_reach", "nothing reaches a node over SSH (no setup step, no workload)")
    if facts is None:
        return skip("ssh_reach", not_tried or NO_LIVE_NODE)
    if facts.error:
        fix = "check the user (settings.ssh_user or the OS Login user) and that the VM knows "
        fix += f"your key: {KEY_HELP}"
        if facts.proxy in PROXY_HELP:
            fix = f"{PROXY_HELP[facts.proxy]}; {fix}"
        return Check(
            "ssh_reach",
            "fail",
            f"{facts.slot}: cannot log in to {facts.worker} as {facts.user}: {facts.error}",
            fix,
        )
    return ok("ssh_reach", f"{facts.slot}: logged in to {facts.worker} as {facts.user}")
