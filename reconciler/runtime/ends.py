"""The runtime half of ``setup.at_boot`` and ``workload.before_end``.

- ``with_boot_script``: a create of an ``at_boot`` slot gets its startup script when it is
  sent: the setup scripts are read then (as bootstrap reads them when it runs), named as
  bootstrap names them and packed by the pure ``model/boot_script.startup_script``.
- ``read_boot``: once a pass, each node still booting with the slot's setup (``core/boot_setup``
  picks them) has its workers' ``tpu-reconciler/setup`` guest attributes read through the
  capacity port, one call per node (or slice), a few at once; a read that fails is unknown and
  changes nothing (it is tried again next pass). Compute Engine is read host by host
  (``instances.getGuestAttributes``). A cloud that reads no boot reports reads nothing: setup
  then runs over SSH once ``core/boot_setup.SILENT_AFTER`` has passed.
- ``run_before_end``: a ``~ before_end`` action, through the workload port's SSH runner.

May: read the setup scripts, call the cloud and the workload port. May not: decide (the
planner does) or record an outcome (``core/outcome`` does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.cloud import BootReports, BootScripts, Cloud
from reconciler.adapters.ssh import resolve_scripts, script_payloads
from reconciler.core import boot_setup
from reconciler.core.memory import Memory
from reconciler.core.plan import Action
from reconciler.errors import PermanentError, ReconcilerError
from reconciler.model.boot_script import (
    KEY,
    NAMESPACE,
    BootReport,
    BootScriptTooLarge,
    parse_report,
    startup_script,
)
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.observed import Node, Observation
from reconciler.model.requests import CreateRequest

log = logging.getLogger(__name__)

#: Guest-attribute reads at once (each is one small API call).
READS: Final = 8


def boot_text(spec: SlotSpec, base_dir: Path) -> str:
    """The startup script of ``spec``'s setup (its scripts read now)."""
    payloads = script_payloads(resolve_scripts(base_dir, spec.setup.scripts))
    try:
        return startup_script(spec.name, spec.setup.generation, payloads)
    except BootScriptTooLarge as e:
        raise PermanentError(f"{spec.name}: {e}") from None


def with_boot_script(desired: Desired, base_dir: Path, create: CreateRequest) -> CreateRequest:
    """``create`` with its slot's startup script when the slot says ``setup.at_boot``."""
    spec = desired.slot(create.name)
    if spec is None or not spec.setup.at_boot:
        return create
    return replace(create, startup_script=boot_text(spec, base_dir))


async def update_boot_script(cloud: object, spec: SlotSpec, node: Node, base_dir: Path) -> None:
    """An ``at_boot`` slot whose node boots with another setup (or none): its next boots run
    this one, where the cloud can change a live node's metadata (every slice's node)."""
    if not isinstance(cloud, BootScripts):
        log.warning("%s: this cloud cannot change a live node's startup script", spec.name)
        return
    text = boot_text(spec, base_dir)
    for part in node.slices or (node,):
        await cloud.set_boot_script(spec.api, part.zone, part.name, text, len(part.endpoints))


def reports(rows: Sequence[Mapping[str, Any]], workers: int) -> list[BootReport | None]:
    """Each worker's report from guest-attribute rows (``worker_id``, ``namespace``, ``key``,
    ``value``), None where a worker has none."""
    found: dict[int, BootReport] = {}
    for row in rows:
        if row.get("namespace") != NAMESPACE or row.get("key") != KEY:
            continue
        try:
            index = int(str(row.get("worker_id")))
        except ValueError:
            continue
        report = parse_report(row.get("value"))
        if report is not None and 0 <= index < workers:
            found[index] = report
    return [found.get(i) for i in range(workers)]


async def _node_reports(cloud: BootReports, api: str, node: Node) -> list[BootReport | None]:
    """Every worker's report, slice by slice for a multislice slot's node."""
    out: list[BootReport | None] = []
    for part in node.slices or (node,):
        workers = len(part.endpoints)
        rows = await cloud.boot_reports(api, part.zone, part.name, workers)
        out += reports(rows, workers)
    return out


async def read_boot(
    cloud: Cloud, desired: Desired, observation: Observation, memory: Memory, now: float
) -> Memory:
    """Fold this pass's boot-script reports into memory (``core/boot_setup.fold``)."""
    targets = boot_setup.targets(desired, observation, memory)
    if not isinstance(cloud, BootReports):
        for spec, node in targets:
            why = "this cloud reads no boot reports (setup runs over SSH after 20m)"
            memory = boot_setup.unread(memory, spec, node, why, now)
        return memory
    reader = cloud
    limit = asyncio.Semaphore(READS)

    async def one(spec: SlotSpec, node: Node) -> list[BootReport | None] | str:
        async with limit:
            try:
                return await _node_reports(reader, spec.api, node)
            except ReconcilerError as e:  # unknown this pass; never a failure
                log.debug("boot reports of %s: %s", node.name, e)
                return e.message

    found = await asyncio.gather(*(one(spec, node) for spec, node in targets))
    for (spec, node), got in zip(targets, found, strict=True):
        if isinstance(got, str):
            memory = boot_setup.unread(memory, spec, node, got, now)
        else:
            memory = boot_setup.fold(memory, spec, node, got, now)
    return memory


async def run_before_end(workloads: object, desired: Desired, action: Action, node: Node) -> str:
    """Carry out a ``~ before_end`` through the workload port (``LiveSetup``)."""
    run = getattr(workloads, "workload_before_end", None)
    if run is None:
        raise PermanentError(f"{action.slot}: no SSH workload runner to run before_end")
    said: str = await run(desired, action, node)
    return said
