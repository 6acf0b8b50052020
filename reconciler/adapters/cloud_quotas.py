"""Chip limits for Cloud TPU from the Cloud Quotas API (``settings.quota_source: cloud``).

One paginated ``GET v1/projects/P/locations/global/services/SERVICE/quotaInfos`` per API the
file uses (limits only: that API does not give use; the planner counts use from the requests
it observes): ``tpu.googleapis.com`` for the Cloud TPU API, ``compute.googleapis.com`` for
Compute Engine. Each QuotaInfo whose id reads like a TPU chip quota of that API
(``TPUV6EPreemptiblePerProjectPerZoneForTPUAPI``: family, mode, zone or region;
``TPUS-PER-TPU-FAMILY-per-project-region`` with a ``tpu_family`` dimension,
``PREEMPTIBLE-TPU-V6E-per-project-region``) gives one ``QuotaSpec`` of that API per
``dimensionsInfos`` entry naming a zone or a region; an entry without one (the default for
every other place) and a negative value (unlimited) give none.

The endpoint is ``https://cloudquotas.googleapis.com/`` unless
``CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS`` (gcloud's override for that API) says
otherwise: nothing reaches Google unless configured to. Tokens and the quota project come
from ``adapters.auth`` as for the TPU API; failures are classified by
``adapters.cloud_errors``.

May: send HTTP requests, read tokens. Must: check the project before it reaches a URL, never
log or raise with a token. May not: decide what to do with the limits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx

from reconciler import __version__
from reconciler.adapters.auth import TokenProvider, choose_quota_project, token_provider_from_env
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import DEFAULT_DELAY, Operation, classify_body
from reconciler.adapters.rest import check_endpoint
from reconciler.errors import TransientCloudError
from reconciler.model.accelerators import COMPUTE_API, TPU_API
from reconciler.model.desired import QuotaSpec
from reconciler.model.names import check_project
from reconciler.model.quotas import family_of_dimension, quota_about, scope_of

DEFAULT_ENDPOINT: Final = "https://cloudquotas.googleapis.com/"
ENDPOINT_ENV: Final = "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS"
MAX_PAGES: Final = 100


def limits_from_infos(infos: Any, api: str = TPU_API) -> list[QuotaSpec]:
    """``QuotaSpec``s from a page of ``api``'s ``quotaInfos`` (entries that say nothing usable
    are left out). Raises ValueError when the page is not shaped like one. Compute Engine's
    on-demand limit names its family in each entry's ``tpu_family`` dimension."""
    if not isinstance(infos, list):
        raise ValueError("quotaInfos is not a list")
    out: list[QuotaSpec] = []
    for info in infos:
        if not isinstance(info, dict) or not isinstance(info.get("quotaId"), str):
            raise ValueError("a QuotaInfo without a quotaId")
        qid = info["quotaId"]
        about = quota_about(qid)
        if about is None or about[0] != api:
            continue  # not a chip quota of a TPU family (API calls, networks, ...)
        for entry in info.get("dimensionsInfos") or []:
            dims = entry.get("dimensions") if isinstance(entry, dict) else None
            details = entry.get("details") if isinstance(entry, dict) else None
            if not isinstance(dims, dict) or not isinstance(details, dict):
                raise ValueError(f"{qid}: a dimensionsInfo without dimensions or details")
            scope = "zone" if "zone" in dims else "region" if "region" in dims else None
            if scope is None or (scope_of(qid) not in (None, scope)):
                continue
            family = about[1] or family_of_dimension(str(dims.get("tpu_family", "")))
            value = int(details.get("value", -1))
            if family is not None and value >= 0:
                place = str(dims[scope])
                out.append(QuotaSpec(family, about[2], scope, place, value, "cloud", qid, api))
    return out


#: The service whose quotaInfos hold each API's TPU limits.
SERVICES: Final = {TPU_API: "tpu.googleapis.com", COMPUTE_API: "compute.googleapis.com"}


async def read_limits(
    project: str,
    *,
    env: Mapping[str, str] | None = None,
    token_provider: TokenProvider | None = None,
    quota_project: str | None = None,
    adc: bool = False,
    client: httpx.AsyncClient | None = None,
    timeout: float = 30.0,
    apis: Sequence[str] = (TPU_API,),
) -> tuple[QuotaSpec, ...]:
    """Every TPU chip limit the Cloud Quotas API gives for ``project`` on each of ``apis``
    (the Cloud TPU API's, and Compute Engine's when a slot or quota uses it)."""
    env = os.environ if env is None else env
    endpoint = check_endpoint(env.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT)
    tokens = token_provider or token_provider_from_env(env, adc=adc)
    owned = client is None
    http = client or httpx.AsyncClient(
        timeout=httpx.Timeout(timeout), headers={"user-agent": f"tpu-reconciler/{__version__}"}
    )
    try:
        out: list[QuotaSpec] = []
        for api in apis:
            out += await _read_service(http, tokens, project, quota_project, endpoint, api)
        return tuple(out)
    finally:
        if owned:
            await http.aclose()


async def _read_service(
    http: httpx.AsyncClient,
    tokens: TokenProvider,
    project: str,
    quota_project: str | None,
    endpoint: str,
    api: str,
) -> list[QuotaSpec]:
    url = (
        f"{endpoint}v1/projects/{check_project(project)}/locations/global/services/"
        f"{SERVICES[api]}/quotaInfos"
    )
    out: list[QuotaSpec] = []
    params: dict[str, str] = {}
    for _ in range(MAX_PAGES):
        headers = {"authorization": f"Bearer {await tokens.token()}"}
        billed = choose_quota_project(quota_project, tokens.quota, project).project
        if billed:
            headers["x-goog-user-project"] = billed
        try:
            response = await http.get(url, params=params, headers=headers)
        except httpx.HTTPError as e:
            raise TransientCloudError(
                f"GET quotaInfos: {type(e).__name__}: {e}", delay=DEFAULT_DELAY
            ) from None
        if not response.is_success:
            verdict = classify_body(Operation.LIST, response.status_code, response.content)
            if isinstance(verdict, Outcome):
                return []
            raise verdict
        try:
            page = response.json()
            out += limits_from_infos(page.get("quotaInfos", []), api)
        except (ValueError, TypeError, AttributeError) as e:
            raise TransientCloudError(f"GET quotaInfos: malformed answer: {e}") from None
        token = page.get("nextPageToken")
        if not token:
            return out
        params = {"pageToken": str(token)}
    raise TransientCloudError(f"GET quotaInfos: more than {MAX_PAGES} pages")
