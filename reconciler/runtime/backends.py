"""Builds the ``Cloud`` a desired file asks for, from the environment: a ``CloudRouter`` over
one cloud per API the controller serves (``APIS``).

Two APIs are served. The Cloud TPU API (``api: tpu``), always, through the transport
``settings.backend`` names: ``rest`` (``adapters.rest``) or ``gcloud`` (``adapters.gcloud``).
Compute Engine (``api: compute``, ``adapters.compute``, REST), only while the file has a slot
on it: a file without one makes no Compute Engine call at all. Each is one ``Api`` in
``APIS``: its name (the ``api`` its requests carry), the state words its requests report
(the metrics' ``state`` label), how its words map onto ``RequestState`` (for records that
keep only the word), whether a file needs it, and the factory of its cloud.

The environment is passed through whole, so every ``CLOUDSDK_*`` variable (an API endpoint
override, an access-token file, a config directory) reaches gcloud and the REST backend alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from reconciler.adapters import compute_parse, compute_states, tpu_api_parse
from reconciler.adapters.cloud import Cloud
from reconciler.adapters.cloud_router import CloudRouter
from reconciler.model import flex
from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired
from reconciler.model.vocabulary import REST


@dataclass(frozen=True, slots=True)
class Api:
    """One API the controller can hold capacity through."""

    name: str  # the ``api`` of its requests
    state_words: tuple[str, ...]  # every ``api_state`` its requests may carry
    state_of: Callable[[str], RequestState]  # an ``api_state`` word's neutral state
    make: Callable[[Desired, dict[str, str]], Cloud]  # its cloud for a desired file
    #: whether a desired file needs its cloud (built only then)
    wanted: Callable[[Desired], bool] = lambda desired: True


def _tpu_cloud(desired: Desired, env: dict[str, str]) -> Cloud:
    """The Cloud TPU API through ``settings.backend`` (``rest`` or ``gcloud``)."""
    settings = desired.settings
    if settings.backend == REST:
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


def _compute_cloud(desired: Desired, env: dict[str, str]) -> Cloud:
    """Compute Engine over REST (whatever ``settings.backend`` says: gcloud has no way to make
    a BULK MIG with a workload policy)."""
    from reconciler.adapters.compute import ComputeCloud

    settings = desired.settings
    return ComputeCloud(
        desired.project,
        concurrency=settings.concurrency,
        env=env,
        quota_project=settings.quota_project,
        adc=settings.credentials == "adc",
        reservations=settings.reservations,
    )


def compute_wanted(desired: Desired) -> bool:
    """True when a slot is held through Compute Engine."""
    return any(s.api == COMPUTE_API for s in desired.slots)


#: The APIs served, by name.
APIS: Final[Mapping[str, Api]] = {
    tpu_api_parse.API: Api(
        tpu_api_parse.API, tpu_api_parse.STATE_WORDS, tpu_api_parse.request_state, _tpu_cloud
    ),
    compute_parse.API: Api(
        compute_parse.API,
        compute_states.STATE_WORDS,
        compute_states.request_state,
        _compute_cloud,
        compute_wanted,
    ),
}
#: Every state word a request of a served API may show (the metrics' ``state`` label).
STATE_WORDS: Final = tuple(dict.fromkeys(w for api in APIS.values() for w in api.state_words))


def make_tpu_cloud(desired: Desired, env: Mapping[str, str] | None = None) -> Cloud:
    """The Cloud TPU API's cloud alone (``doctor`` asks each API on its own)."""
    return _tpu_cloud(desired, dict(os.environ if env is None else env))


def make_compute_cloud(desired: Desired, env: Mapping[str, str] | None = None) -> Cloud:
    """Compute Engine's cloud alone (``doctor`` asks each API on its own)."""
    return _compute_cloud(desired, dict(os.environ if env is None else env))


def make_cloud(desired: Desired, env: Mapping[str, str] | None = None) -> Cloud:
    """A router over one cloud per served API the file needs, each built for ``desired``."""
    environ = dict(os.environ if env is None else env)
    return CloudRouter(
        {name: api.make(desired, environ) for name, api in APIS.items() if api.wanted(desired)}
    )


def cloud_key(desired: Desired) -> tuple[object, ...]:
    """What the cloud ``make_cloud`` builds depends on: a change of it builds a new one."""
    s = desired.settings
    return (
        *(desired.project, s.backend, s.concurrency, s.quota_project, s.credentials),
        flex_wanted(desired),  # flex-start slots are read on v2alpha1
        tuple(name for name, api in APIS.items() if api.wanted(desired)),
        tuple(sorted(s.reservations.items())),
    )


class Clouds:
    """The cloud of the intent in force, built by ``factory`` and kept while the settings
    that choose it (``cloud_key``) stay the same; the pass and the actions share one."""

    def __init__(self, factory: Callable[[Desired], Cloud]) -> None:
        self._factory = factory
        self._cloud: Cloud | None = None
        self._key: tuple[object, ...] | None = None
        #: the transport of the last cloud used, as users read it ("rest", "gcloud"; kept
        #: after ``aclose``)
        self.backend = "?"

    async def __call__(self, desired: Desired) -> Cloud:
        key = cloud_key(desired)
        if self._cloud is None or key != self._key:
            await self.aclose()
            self._cloud = self._factory(desired)
            self._key = key
            self.backend = self._cloud.capability.transport
        return self._cloud

    async def aclose(self) -> None:
        if self._cloud is not None:
            cloud, self._cloud = self._cloud, None
            await cloud.aclose()


def word_state(word: str, api: str = tpu_api_parse.API) -> RequestState:
    """The neutral state of a state word of ``api`` in a record that keeps only the word: an
    event record written before ``qr.state`` said ``request``, a capacity history row (each
    says its API). A record that says the TPU API may be one written before records said
    their API at all: a word only Compute Engine uses (``RUNNING``, ``TERMINATED``, ...) is
    read with Compute Engine's mapping then (the words both use mean the same state in each).
    An API not served reads as ``unknown``: never acted on."""
    served = APIS.get(api)
    state = served.state_of(word) if served is not None else RequestState.UNKNOWN
    if api == tpu_api_parse.API and state == RequestState.UNKNOWN:
        return compute_states.request_state(word)
    return state


def flex_wanted(desired: Desired) -> bool:
    """True when a slot is flex-start: queued resources are then read on v2alpha1, the only
    version that says when a run ends (``terminationTime``)."""
    return any(s.mode == flex.MODE for s in desired.slots)
