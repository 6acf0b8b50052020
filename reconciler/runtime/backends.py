"""Builds the ``Cloud`` a desired file asks for, from the environment: a ``CloudRouter`` over
one cloud per API the controller serves (``APIS``).

Today one API is served, the Cloud TPU API (``api: tpu``), through the transport
``settings.backend`` names: ``rest`` (``adapters.rest``) or ``gcloud`` (``adapters.gcloud``).
Another API plugs in as one more ``Api`` in ``APIS``: its name (the ``api`` its requests
carry), the state words its requests report (the metrics' ``state`` label), how its words
map onto ``RequestState`` (for records that keep only the word), and the factory of its
cloud.

The environment is passed through whole, so every ``CLOUDSDK_*`` variable (an API endpoint
override, an access-token file, a config directory) reaches gcloud and the REST backend alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from reconciler.adapters import tpu_api_parse
from reconciler.adapters.cloud import Cloud
from reconciler.adapters.cloud_router import CloudRouter
from reconciler.model import flex
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired


@dataclass(frozen=True, slots=True)
class Api:
    """One API the controller can hold capacity through."""

    name: str  # the ``api`` of its requests
    state_words: tuple[str, ...]  # every ``api_state`` its requests may carry
    state_of: Callable[[str], RequestState]  # an ``api_state`` word's neutral state
    make: Callable[[Desired, dict[str, str]], Cloud]  # its cloud for a desired file


def _tpu_cloud(desired: Desired, env: dict[str, str]) -> Cloud:
    """The Cloud TPU API through ``settings.backend`` (``rest`` or ``gcloud``)."""
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


#: The APIs served, by name.
APIS: Final[Mapping[str, Api]] = {
    tpu_api_parse.API: Api(
        tpu_api_parse.API, tpu_api_parse.STATE_WORDS, tpu_api_parse.request_state, _tpu_cloud
    ),
}
#: Every state word a request of a served API may show (the metrics' ``state`` label).
STATE_WORDS: Final = tuple(dict.fromkeys(w for api in APIS.values() for w in api.state_words))


def make_cloud(desired: Desired, env: Mapping[str, str] | None = None) -> Cloud:
    """A router over one cloud per served API, each built for ``desired``."""
    environ = dict(os.environ if env is None else env)
    return CloudRouter({name: api.make(desired, environ) for name, api in APIS.items()})


def word_state(word: str, api: str = tpu_api_parse.API) -> RequestState:
    """The neutral state of a state word of ``api`` in a record that keeps only the word: an
    event record written before ``qr.state`` said ``request``, a capacity history row (each
    says its API; one written before rows did is the TPU API's). An API not served reads as
    ``unknown``: never acted on."""
    served = APIS.get(api)
    return served.state_of(word) if served is not None else RequestState.UNKNOWN


def flex_wanted(desired: Desired) -> bool:
    """True when a slot is flex-start: queued resources are then read on v2alpha1, the only
    version that says when a run ends (``terminationTime``)."""
    return any(s.mode == flex.MODE for s in desired.slots)
