"""The cloud the setup runner reads guest attributes and writes at_boot scripts through
follows the intent as the controller's does (``runtime.backends.Clouds``): a file that adds a
Compute Engine slot later gets a cloud that serves Compute Engine (nothing is sent here)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reconciler.adapters.statedir import StateDir
from reconciler.model.load import parse_desired
from reconciler.runtime.setup import LiveSetup

TPU_ONLY = (
    "project: proj-1\nslots:\n  - {name: a, zone: us-central2-b, accelerator: v4-8, want: held}\n"
)
WITH_COMPUTE = TPU_ONLY + (
    "  - {name: b, zone: us-east5-b, accelerator: v6e-8, api: compute, want: held}\n"
)


def test_a_compute_slot_added_later_is_served(tmp_path: Path) -> None:
    setup = LiveSetup(tmp_path / "desired.yaml", StateDir(tmp_path / "state"), env={})

    async def served() -> tuple[list[str], list[str]]:
        try:
            first = await setup._cloud_for(parse_desired(TPU_ONLY))
            before = sorted(first.clouds)
            second = await setup._cloud_for(parse_desired(WITH_COMPUTE))
            return before, sorted(second.clouds)
        finally:
            await setup.aclose()

    assert asyncio.run(served()) == (["tpu"], ["compute", "tpu"])
