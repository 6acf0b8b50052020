"""The words of desired.yaml's closed sets, spelled once: modes, APIs and wants.

Every module that checks, offers, defaults or maps one of these words reads it from here: the
schema's ``Literal`` types, the CLI's ``choices``, the request bodies' accepted modes, the
metrics' label values, the names' mode prefixes. A new mode or API starts in this file.

Values only: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, get_args

#: How a slot pays for its capacity (``mode:``).
Mode = Literal["spot", "on-demand", "reserved", "flex-start"]
SPOT: Final = "spot"
ON_DEMAND: Final = "on-demand"
RESERVED: Final = "reserved"
FLEX_START: Final = "flex-start"
MODES: Final[tuple[str, ...]] = get_args(Mode)
#: The mode of a slot that does not say (nor its defaults).
DEFAULT_MODE: Final = SPOT
#: The modes Google keeps chip quotas for (a flex-start create is charged to spot's:
#: ``model.quotas.quota_mode``).
QUOTA_MODES: Final[tuple[str, ...]] = (SPOT, ON_DEMAND, RESERVED)
#: Each mode's short form: the prefix of the names the controller gives requests, and the
#: TUI's column.
MODE_SHORT: Final[Mapping[str, str]] = MappingProxyType(
    {SPOT: "spot", ON_DEMAND: "od", RESERVED: "res", FLEX_START: "flex"}
)

#: Which Google API holds a slot's capacity (``api:``): the Cloud TPU API's queued resources,
#: or Compute Engine's instances and MIG slices.
Api = Literal["tpu", "compute"]
TPU_API: Final = "tpu"
COMPUTE_API: Final = "compute"
APIS: Final[tuple[str, ...]] = get_args(Api)
#: The API of a request that does not say (a hand-made one): the Cloud TPU API. The file's
#: ``api:`` names each slot's (``model/accelerators`` picks one per family when it does not).
DEFAULT_API: Final = TPU_API

#: How the controller talks to the cloud (``settings.backend``): Google's REST APIs over
#: httpx, or the gcloud CLI.
Backend = Literal["gcloud", "rest"]
GCLOUD: Final = "gcloud"
REST: Final = "rest"
BACKENDS: Final[tuple[str, ...]] = get_args(Backend)
DEFAULT_BACKEND: Final = REST

#: What the user asks of a slot (``want:``): its capacity held, or given back.
Want = Literal["held", "released"]
HELD: Final = "held"
RELEASED: Final = "released"
WANTS: Final[tuple[str, ...]] = get_args(Want)
#: The want of a slot that does not say (outside a race group, whose group decides).
DEFAULT_WANT: Final = HELD
