"""A local Cloud TPU v2 API and Compute Engine v1 API for demos and tests: the real gcloud
can be pointed at it.

Public surface (everything else is private)::

    from reconciler.emulator import Emulator, Scenario, Fault, RequestRecord
    from reconciler.emulator import EmulatorClient   # the same controls, for another process

    with Emulator(Scenario.load("story.yaml"), speed=60) as emu:
        env = {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": emu.url, ...}   # emu.gcloud_env(...)
        emu.set_capacity("us-central2-b", "v4-8", 1)
        emu.compute.set_capacity("us-central1-c", "tpu7x-standard-4t", 16)
        emu.advance(30)                       # emulated seconds, instead of sleeping

This package may open sockets and start threads (``_server``) and read scenario files; the
state machine (``_world``), rendering (``_records``) and routing (``_api``) are pure. The
controller never imports it: it talks to the emulator over HTTP like to the real service.
See docs/emulator.md.
"""

from __future__ import annotations

from reconciler.emulator._client import ComputeClient, EmulatorClient
from reconciler.emulator._compute_control import ComputeControls
from reconciler.emulator._scenario import Fault, Scenario, ScenarioError, Timings
from reconciler.emulator._server import Emulator, RequestRecord

__all__ = [
    "ComputeClient",
    "ComputeControls",
    "Emulator",
    "EmulatorClient",
    "Fault",
    "RequestRecord",
    "Scenario",
    "ScenarioError",
    "Timings",
]
