"""kill -9 of the controller (``tpu-reconciler run``, a real process) in the middle of a
multi-host Compute Engine create, at each point between its steps: after the workload policy
was asked for (template and policy made, no MIG), and after the MIG was (a MIG without
hosts). The next controller finishes the job: one slice, no duplicate, and no template,
policy or MIG left over from the create that died.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.emulator import Emulator
from tests.reliability._harness import ControllerProcess, controller_env, wait_until
from tests.support.compute_sdk import decode_all

pytestmark = pytest.mark.integration

ZONE = "us-central1-c"
DESIRED = f"""\
project: test-project
settings:
  backend: rest
  poll_interval: 1s
  fast_poll_interval: 0.2s
defaults:
  setup: {{tmux: false}}
slots:
  - name: s
    zone: {ZONE}
    accelerator: tpu7x-16
    mode: spot
    want: held
"""


def served(emu: Emulator, key: str) -> int:
    return sum(1 for r in emu.requests() if r.key == key and r.status == 200)


def settled(emu: Emulator) -> bool:
    """One slice, both hosts RUNNING, and nothing else of ours: one template, one policy,
    the ones the MIG uses."""
    group = emu.compute.group(ZONE, "s")
    if group is None or len(emu.compute.groups()) != 1:
        return False
    hosts = [i for i in emu.compute.instances() if i["name"].startswith("s-")]
    templates = [t["name"] for t in emu.compute.templates()]
    policies = [p["name"] for p in emu.compute.policies()]
    return (
        sorted(h["name"] for h in hosts) == ["s-0", "s-1"]
        and all(h["status"] == "RUNNING" for h in hosts)
        and templates == [group["instanceTemplate"].rsplit("/", 1)[-1]]
        and policies == [group["resourcePolicies"]["workloadPolicy"].rsplit("/", 1)[-1]]
    )


@pytest.mark.parametrize(
    "after",
    ["compute.resourcePolicies.insert", "compute.instanceGroupManagers.insert"],
    ids=["policy-made", "mig-made"],
)
def test_kill_9_mid_create_leaves_no_duplicate_and_no_orphan(tmp_path: Path, after: str) -> None:
    desired, state = tmp_path / "desired.yaml", tmp_path / "state"
    desired.write_text(DESIRED)
    with Emulator(speed=20.0, record_responses=True) as emu:
        emu.compute.set_operation_delay(60)  # each step waits ~3 s: time to kill it there
        ctl = ControllerProcess(desired, state, controller_env(emu, tmp_path), tmp_path / "log")
        ctl.start()
        try:
            wait_until(f"{after} served", lambda: served(emu, f"POST {after}") == 1, timeout=30)
            ctl.kill9()
            assert emu.compute.group(ZONE, "s") is None or not emu.compute.instances()
            emu.compute.set_operation_delay(0)
            ctl.start()
            wait_until("one slice and nothing else", lambda: settled(emu), timeout=60)
        finally:
            if ctl.alive():
                ctl.terminate()
        assert served(emu, "POST compute.instanceGroupManagers.createInstances") == 1
        assert served(emu, "POST compute.instanceTemplates.insert") == 2
        decode_all(emu.requests())
