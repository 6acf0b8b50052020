"""Builds the ``Cloud`` a desired file asks for (``settings.backend``), from the environment.

The environment is passed through whole, so every ``CLOUDSDK_*`` variable (an API endpoint
override, an access-token file, a config directory) reaches gcloud and the REST backend alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from reconciler.adapters.cloud import Cloud
from reconciler.model import flex
from reconciler.model.desired import Desired


def make_cloud(desired: Desired, env: Mapping[str, str] | None = None) -> Cloud:
    env = dict(os.environ if env is None else env)
    settings = desired.settings
    if settings.backend == "rest":
        from reconciler.adapters.rest import RestCloud

        return RestCloud(
            desired.project,
            concurrency=settings.concurrency,
            env=env,
            quota_project=settings.quota_project,
            adc=settings.credentials == "adc",
            alpha_reads=flex_wanted(desired),
        )
    from reconciler.adapters.gcloud import GcloudCloud

    return GcloudCloud(
        desired.project,
        concurrency=settings.concurrency,
        env=env,
        quota_project=settings.quota_project,
        alpha_reads=flex_wanted(desired),
    )


def flex_wanted(desired: Desired) -> bool:
    """True when a slot is flex-start: queued resources are then read on v2alpha1, the only
    version that says when a run ends (``terminationTime``)."""
    return any(s.mode == flex.MODE for s in desired.slots)
