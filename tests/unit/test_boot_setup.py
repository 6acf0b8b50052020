"""``setup.at_boot`` as values and rules: the startup script built from the setup scripts, what
it reports, the planner waiting for the node's boot instead of running setup over SSH (and
running it over SSH when the node boots with another setup, or says nothing), the memory and
status of each worker, the create and its encodings."""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType

import pytest

from reconciler.adapters import _gcloud_args as gargs
from reconciler.adapters.tpu_api_body import create_body
from reconciler.adapters.tpu_api_parse import QRState, node_from_api
from reconciler.core import boot_setup
from reconciler.core.ends_status import with_ends
from reconciler.core.memory import Memory, SlotMemory, from_dict, to_dict
from reconciler.core.plan import Kind, plan
from reconciler.core.render import format_status
from reconciler.core.status import build_status
from reconciler.errors import UnsafeName
from reconciler.model.boot_script import (
    MAX_BYTES,
    BootReport,
    BootScriptTooLarge,
    boot_generation,
    parse_report,
    startup_script,
)
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest
from reconciler.runtime.ends import reports
from tests.support.worlds import desired, node, qr, setup, slot, world

IPS = ("10.0.0.2", "10.0.0.3")
SCRIPTS = [("01-base.sh", b"#!/bin/sh\necho base\n"), ("02-more.sh", b"echo 'more'\n")]
T0 = 1_000_000.0


def at_boot(generation: int = 0) -> object:
    flags = replace(setup(bootstrap=True, generation=generation, scripts=["s.sh"]), at_boot=True)
    return replace(slot("a", accelerator="v4-16", flags=flags), setup=flags)


def seen(boots: int | None = 0) -> Observation:
    n = replace(node("a", ips=IPS, accelerator="v4-16"), boot_generation=boots)
    return world(replace(qr("a", state=QRState.ACTIVE, accelerator="v4-16")), n)


def look(mem: Memory, *values: str | None, generation: int = 0) -> Memory:
    spec = at_boot(generation)
    (target,) = boot_setup.targets(desired(spec), seen(generation), mem)  # type: ignore[arg-type]
    got = [parse_report(v) for v in values]
    return boot_setup.fold(mem, target[0], target[1], got, T0)


def kinds(mem: Memory, generation: int = 0, boots: int | None = 0, now: float = T0) -> list[str]:
    p = plan(desired(at_boot(generation)), seen(boots), mem, now)  # type: ignore[arg-type]
    return [f"{a.kind.value}: {a.reason}" for a in p.actions if a.kind == Kind.BOOTSTRAP]


# --- the script ---------------------------------------------------------------------------------


def test_the_startup_script_names_its_slot_and_generation() -> None:
    text = startup_script("alpha", 3, SCRIPTS)
    assert text.splitlines()[:2] == [
        "#!/bin/bash",
        "# tpu-reconciler boot setup: slot=alpha generation=3",
    ]
    assert boot_generation(text) == 3
    assert "01-base.sh, 02-more.sh" in text and "echo base" not in text  # packed
    assert startup_script("alpha", 3, SCRIPTS) == text  # the same scripts, the same text
    assert boot_generation("#!/bin/bash\necho mine\n") is None
    assert boot_generation(None) is None


def test_the_startup_script_refuses_what_metadata_cannot_hold() -> None:
    noise = random.Random(0).randbytes(MAX_BYTES)  # does not compress
    with pytest.raises(BootScriptTooLarge, match="KiB startup script; metadata holds 256 KiB"):
        startup_script("alpha", 0, [("01-big.bin", noise)])
    with pytest.raises(ValueError, match="invalid boot script name"):
        startup_script("alpha", 0, [("../x", b"")])


@pytest.mark.parametrize(
    ("value", "report"),
    [
        ("g3 done", BootReport(3, "done")),
        ("g3 running 1/2 01-base.sh", BootReport(3, "running", "1/2 01-base.sh")),
        ("g0 failed 02-more.sh exit 7", BootReport(0, "failed", "02-more.sh exit 7")),
        ("g3 exploded", None),
        ("done", None),
        (None, None),
        (3, None),
    ],
)
def test_a_workers_report(value: object, report: BootReport | None) -> None:
    assert parse_report(value) == report


def test_reports_from_guest_attribute_rows() -> None:
    rows = [
        {"worker_id": 0, "namespace": "guest-agent", "key": "hostname", "value": "t1v-w-0"},
        {"worker_id": 0, "namespace": "tpu-reconciler", "key": "setup", "value": "g0 done"},
        {"worker_id": 1, "namespace": "tpu-reconciler", "key": "setup", "value": "garbage"},
        {"worker_id": 7, "namespace": "tpu-reconciler", "key": "setup", "value": "g0 done"},
    ]
    assert reports(rows, 2) == [BootReport(0, "done"), None]


def test_a_node_boots_with_the_generation_its_metadata_names() -> None:
    data = {
        "name": "projects/p/locations/us-central2-b/nodes/a",
        "state": "READY",
        "metadata": {"startup-script": startup_script("a", 2, SCRIPTS), "ssh-keys": "k"},
    }
    assert node_from_api(data).boot_generation == 2
    assert node_from_api({**data, "metadata": {"startup-script": "echo"}}).boot_generation is None
    assert node_from_api({**data, "metadata": "junk"}).boot_generation is None


# --- the create -------------------------------------------------------------------------------


def test_the_create_carries_it_in_the_node_metadata_and_gcloud_reads_it_from_a_file() -> None:
    request = CreateRequest("a", "us-central2-b", "v4-8", "tpu-ubuntu2204-base", "spot")
    body = create_body("my-project-123", request, now=T0)
    assert body["tpu"]["nodeSpec"][0]["node"]["metadata"] == {}
    booting = replace(request, startup_script="#!/bin/bash\n")
    node_spec = create_body("my-project-123", booting, now=T0)["tpu"]["nodeSpec"][0]["node"]
    assert node_spec["metadata"] == {
        "enable-guest-attributes": "TRUE",
        "startup-script": "#!/bin/bash\n",
    }
    argv = gargs.create_args(booting, "/tmp/tpu-reconciler-x/startup-script")
    assert "--metadata-from-file=startup-script=/tmp/tpu-reconciler-x/startup-script" in argv
    assert "--metadata=enable-guest-attributes=TRUE" in argv
    assert not any("#!/bin/bash" in a for a in argv)  # never the script itself
    with pytest.raises(UnsafeName):
        gargs.create_args(booting, "/tmp/a,b=c")


# --- the planner ----------------------------------------------------------------------------


def test_the_planner_waits_for_the_boot_and_records_it_done_from_the_reports() -> None:
    assert kinds(Memory()) == []  # the node's boot runs it: nothing over SSH
    mem = look(Memory(), "g0 running 1/2 01-base.sh", None)
    assert mem.boot["a"].workers == ("running", "waiting")
    assert kinds(mem) == []
    mem = look(mem, "g0 done", "g0 done")
    n = seen().nodes[0]
    assert mem.setup_done("a", "bootstrap", n.instance, 0)
    assert boot_setup.targets(desired(at_boot()), seen(), mem) == []  # type: ignore[arg-type]
    assert from_dict(to_dict(mem)) == mem


def test_an_older_boots_report_is_not_this_generations() -> None:
    mem = look(Memory(), "g0 done", "g0 done")
    assert kinds(mem, generation=1, boots=1) == []  # waits for g1's reports
    stale = look(Memory(), "g0 done", "g1 done", generation=1)
    assert stale.boot["a"].workers == ("waiting", "done")


def test_a_failed_boot_is_told_once_and_not_run_over_ssh() -> None:
    mem = look(Memory(), "g0 done", "g0 failed 02-more.sh exit 7")
    assert kinds(mem) == []
    p = plan(desired(at_boot()), seen(), mem, T0)  # type: ignore[arg-type]
    (notice,) = [n for n in p.notices if n.event == "boot-failed"]
    assert notice.message.startswith("02-more.sh exit 7 on worker 1; fix the script")
    told = replace(mem, notified=frozenset({notice.key}))
    assert not [n for n in plan(desired(at_boot()), seen(), told, T0).notices  # type: ignore[arg-type]
                if n.event == "boot-failed"]  # fmt: skip


@pytest.mark.parametrize(
    ("generation", "boots", "why"),
    [
        (0, None, "boots without the setup scripts: generation 0 over SSH"),
        (1, 0, "boots setup generation 0: generation 1 over SSH (and for its next boot)"),
    ],
)
def test_setup_runs_over_ssh_when_the_node_boots_with_another(
    generation: int, boots: int | None, why: str
) -> None:
    (kind,) = kinds(Memory(), generation=generation, boots=boots)
    assert kind.startswith("bootstrap: node a@1001 ") and kind.endswith(why)


def test_setup_runs_over_ssh_when_no_worker_says_anything() -> None:
    n = seen().nodes[0]
    slots = {"a": SlotMemory(active_instance=n.instance, active_since=T0)}
    mem = Memory(slots=MappingProxyType(slots))
    assert kinds(mem, now=T0 + boot_setup.SILENT_AFTER - 1) == []
    (kind,) = kinds(mem, now=T0 + boot_setup.SILENT_AFTER)
    assert kind.endswith("reported its boot script in 20m: generation 0 over SSH")
    spoke = look(mem, "g0 running 0/2", None)
    assert kinds(spoke, now=T0 + 2 * boot_setup.SILENT_AFTER) == []


def test_tailscale_waits_for_the_boot() -> None:
    flags = replace(at_boot().setup, tailscale=True)  # type: ignore[attr-defined]
    spec = replace(at_boot(), setup=flags)  # type: ignore[type-var]
    p = plan(desired(spec), seen(), Memory(), T0)
    assert not [a for a in p.actions if a.kind in (Kind.BOOTSTRAP, Kind.TAILSCALE)]
    done = look(Memory(), "g0 done", "g0 done")
    p = plan(desired(spec), seen(), done, T0)
    assert [a.kind for a in p.actions if a.kind in (Kind.BOOTSTRAP, Kind.TAILSCALE)] == [
        Kind.TAILSCALE
    ]


def test_a_create_says_so() -> None:
    p = plan(desired(at_boot()), world(), Memory(), T0)  # type: ignore[arg-type]
    (create,) = p.actions
    assert create.reason.endswith("; setup at boot (1 script, generation 0)")


# --- status -----------------------------------------------------------------------------------


def test_status_shows_each_worker_and_the_note() -> None:
    want = desired(at_boot())  # type: ignore[arg-type]
    mem = look(Memory(), "g0 running 1/2 01-base.sh", "g0 done")

    def snapshot(m: Memory) -> object:
        return build_status(
            desired=want, desired_file="d.yaml", errors=(), observation=seen(),
            observed_at=T0, memory=m, plan=plan(want, seen(), m, T0), now=T0, backend="rest",
        )  # fmt: skip

    snap = snapshot(mem)
    row = snap.slot("a")  # type: ignore[attr-defined]
    assert row.setup.bootstrap == "running"
    assert row.setup.at_boot.workers == ("running", "done")
    assert "setup at boot 1/2" in format_status(snap, T0)  # type: ignore[arg-type]
    failed = snapshot(look(Memory(), "g0 failed 01-base.sh exit 1", "g0 done"))
    row = failed.slot("a")  # type: ignore[attr-defined]
    assert row.setup.bootstrap == "failed"
    assert "setup failed at boot (01-base.sh exit 1 on worker 0)" in format_status(failed, T0)  # type: ignore[arg-type]
    done = snapshot(look(Memory(), "g0 done", "g0 done")).slot("a")  # type: ignore[attr-defined]
    assert done.setup.bootstrap == "done" and done.setup.at_boot.workers == ("done", "done")
    assert with_ends((), want, seen(), mem, T0) == ()


def test_reports_that_cannot_be_read_are_unknown_and_said() -> None:
    spec = at_boot()
    n = seen().nodes[0]
    mem = boot_setup.unread(Memory(), spec, n, "PERMISSION_DENIED: no", T0)  # type: ignore[arg-type]
    b = mem.boot["a"]
    assert (b.workers, b.detail) == (
        ("waiting", "waiting"),
        "cannot read the workers' reports: PERMISSION_DENIED: no",
    )
    assert kinds(mem) == []  # still waiting for the boot (up to SILENT_AFTER), never a failure
    assert not mem.setup_done("a", "bootstrap", n.instance, 0)
