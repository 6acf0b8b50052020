"""Quotas per API, slots that can never fit, and refusals lifted by a higher limit.

- Each API has its own quotas: Compute Engine's ids (``TPUS_PER_TPU_FAMILY``,
  ``PREEMPTIBLE_TPU_V6E``) are read as that API's, for the right family and mode.
- A slot bigger than a limit of the file (or its owner's cap) is refused by ``validate`` at
  its line, with the numbers; one bigger than a cloud's limit waits as "never fits".
- A create the cloud refused for quota goes again when the use under the quota drops *or* a
  higher limit is known for it (the file's new ``chips:``, the Cloud Quotas API's), also
  across a restart; never twice for the same limit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from reconciler.adapters.cloud_errors import Operation, classify
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import quota
from reconciler.core.memory import Memory, from_dict, to_dict
from reconciler.core.outcome import outcome
from reconciler.core.plan import Kind, plan
from reconciler.core.render import format_plan
from reconciler.errors import InvalidDesiredState, QuotaExceeded
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, QuotaSpec
from reconciler.model.load import parse_desired
from reconciler.model.observed import Observation
from reconciler.model.quotas import parse_refusal, quota_about, quota_id
from tests.support.worlds import qr, world

EW4A, EW4B = "europe-west4-a", "europe-west4-b"
TPU_ID = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def refused_words(limit: int) -> str:
    return f"Quota '{TPU_ID}' exhausted. Limit: {limit} in zone {EW4A}."


def text(*slots: str, quotas: str = "", head: str = "") -> str:
    body = f"project: my-project-1\n{head}"
    if quotas:
        body += "quotas:\n" + quotas
    return body + "slots:\n" + "".join(slots)


def s(name: str, acc: str = "v6e-8", extra: str = "") -> str:
    return (
        f"  - {{name: {name}, zone: {EW4A}, accelerator: {acc}, mode: spot{extra}, want: held}}\n"
    )


def occupied(name: str, acc: str = "v6e-8", api: str = "tpu") -> CapacityRequest:
    return replace(qr(name, EW4A, QRState.ACTIVE, accelerator=acc), mode="spot", api=api)


# --- whose quota an id is ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "family", "about"),
    [
        (TPU_ID, None, ("tpu", "v6e", "spot")),
        ("TPUV4PodPerProjectPerRegionForTPUAPI", None, ("tpu", "v4", "on-demand")),
        ("TPUS_PER_TPU_FAMILY", "v6e", ("compute", "v6e", "on-demand")),
        ("TPUS-PER-TPU-FAMILY-per-project-region", "tpu7x", ("compute", "tpu7x", "on-demand")),
        ("compute.googleapis.com/tpus_per_tpu_family", None, ("compute", None, "on-demand")),
        ("PREEMPTIBLE_TPU_V6E", None, ("compute", "v6e", "spot")),
        ("PREEMPTIBLE-TPU-TPU7X-per-project-region", None, ("compute", "tpu7x", "spot")),
        ("compute.googleapis.com/preemptible_tpu_v5p", None, ("compute", "v5p", "spot")),
        ("CPUS-ALL-REGIONS", None, None),
    ],
)
def test_quota_about(words: str, family: str | None, about: object) -> None:
    assert quota_about(words, family) == about


def test_compute_quota_ids_and_its_refusal_words() -> None:
    assert quota_id("v6e", "on-demand", "region", "compute") == "TPUS_PER_TPU_FAMILY"
    assert quota_id("tpu7x", "spot", "region", "compute") == "PREEMPTIBLE_TPU_TPU7X"
    assert quota_id("v6e", "flex-start", "region", "compute") == "PREEMPTIBLE_TPU_V6E"
    r = parse_refusal("Quota 'TPUS_PER_TPU_FAMILY' exceeded. Limit: 64.0 in region us-central1.")
    assert r is not None
    assert (r.quota_id, r.limit, r.scope, r.place) == (
        "TPUS_PER_TPU_FAMILY",
        64,
        "region",
        "us-central1",
    )


# --- never fits -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "message"),
    [
        (
            text(
                s("big", "v5litepod-16", ", slices: 2"),
                quotas="  - {family: v5litepod, mode: spot, zone: europe-west4-a, chips: 16}\n",
            ),
            "desired.yaml:5:52: slot 'big' can never fit: a 2-slice v5litepod-16 is 32 chips, "
            "more than quotas[0] allows (16 spot v5litepod chips in europe-west4-a)",
        ),
        (
            text(
                s("big", "v6e-16"),
                quotas="  - {family: v6e, mode: spot, region: europe-west4, chips: 8}\n",
            ),
            "a v6e-16 is 16 chips, more than quotas[0] allows (8 spot v6e chips in europe-west4)",
        ),
        (
            text(
                s("big", "v6e-16", ", owner: alice"), head="members:\n  alice: {chips: {v6e: 8}}\n"
            ),
            "a v6e-16 is 16 chips, more than alice's cap of 8 v6e chips (members:)",
        ),
    ],
)
def test_validate_refuses_a_slot_that_can_never_fit(file: str, message: str) -> None:
    with pytest.raises(InvalidDesiredState) as e:
        parse_desired(file)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "file",
    [
        # exactly the limit: it fits
        text(
            s("a", "v6e-16"),
            quotas="  - {family: v6e, mode: spot, zone: europe-west4-a, chips: 16}\n",
        ),
        # another API's limit does not apply
        text(
            s("a", "v6e-16"),
            quotas="  - {family: v6e, mode: spot, zone: europe-west4-a, chips: 8, api: compute}\n",
        ),
        # a released slot asks for nothing
        text(
            s("a", "v6e-16").replace("want: held", "want: released"),
            quotas="  - {family: v6e, mode: spot, zone: europe-west4-a, chips: 8}\n",
        ),
    ],
)
def test_what_fits_validates(file: str) -> None:
    parse_desired(file)


def test_a_slot_bigger_than_the_clouds_limit_never_fits() -> None:
    d = parse_desired(text(s("big", "v5litepod-16", ", slices: 2")))
    limit = QuotaSpec("v5litepod", "spot", "zone", EW4A, 16, "cloud", "TPUV5LITEPODPreemptible")
    d = replace(d, quotas=(limit,))
    p = plan(d, world())
    (gated,) = p.gated
    assert gated.why == "never fits: needs 32, limit 16 spot v5litepod chips in europe-west4-a"
    assert "waiting  create big: never fits: needs 32, limit 16" in format_plan(p)
    (state,) = quota.slot_states(d.quotas, p.gated, p.blocked, Memory()).values()
    assert (state.state, state.limit, state.needs, state.api) == ("never-fits", 16, 32, "tpu")
    (lim,) = quota.limits(d.quotas, world(), p.gated)
    assert lim.waiting == ("big",)


def test_a_refusal_below_the_create_itself_says_never_fits() -> None:
    d = parse_desired(text(s("big", "v6e-32")))
    p = plan(d, world())
    (create,) = p.actions
    error = classify(Operation.CREATE, code=429, message=refused_words(16))
    assert isinstance(error, QuotaExceeded)
    memory = outcome(create, error, Memory(), 100.0, None, 0.5).memory
    later = plan(d, world(), memory, 10_000.0)
    (blocked,) = later.blocked
    assert blocked.why.startswith("quota: never fits: needs 32, limit 16 (")
    state = quota.slot_states(d.quotas, later.gated, later.blocked, memory)["big"]
    assert state.state == "never-fits" and state.message.startswith("never fits: needs 32")


# --- a refusal lifted by a higher limit ---------------------------------------------------------


def refused(d: Desired, seen: Observation, limit: int) -> Memory:
    """Plan, send the create of "c", have the cloud refuse it at ``limit``."""
    (create,) = [a for a in plan(d, seen).actions if a.slot == "c"]
    error = classify(Operation.CREATE, code=429, message=refused_words(limit))
    assert isinstance(error, QuotaExceeded)
    return outcome(create, error, Memory(), 100.0, None, 0.5).memory


def cloud_limit(chips: int) -> QuotaSpec:
    return QuotaSpec("v6e", "spot", "zone", EW4A, chips, "cloud", TPU_ID)


def with_quotas(d: Desired, *quotas: QuotaSpec) -> Desired:
    return replace(d, quotas=quotas)


FULL = world(occupied("a"), occupied("b"))


@dataclass(frozen=True)
class Lift:
    id: str
    then: tuple[QuotaSpec, ...]  # the limits known when the create was sent
    now: tuple[QuotaSpec, ...]  # the limits known now
    refused_at: int  # the cloud's words
    goes: bool
    restart: bool = False


LIFTS = [
    Lift("no limit known, none now: blocked", (), (), 16, False),
    Lift("the cloud's limit raised (Cloud Quotas API): goes", (), (cloud_limit(24),), 16, True),
    Lift("the same limit read again: blocked", (), (cloud_limit(16),), 16, False),
    Lift("a lower limit: blocked", (), (cloud_limit(8),), 16, False),
    Lift(
        "raised, across a restart (memory keeps the limit it was refused at)",
        (),
        (cloud_limit(24),),
        16,
        True,
        restart=True,
    ),
    Lift(
        "the file believed 32, the cloud said 16: 32 again is no news (no loop)",
        (replace(cloud_limit(32), source="file"),),
        (replace(cloud_limit(32), source="file"),),
        16,
        False,
    ),
    Lift(
        "the file raised past what it believed: goes",
        (replace(cloud_limit(32), source="file"),),
        (replace(cloud_limit(48), source="file"),),
        16,
        True,
    ),
    Lift(
        "another API's higher limit lifts nothing",
        (),
        (replace(cloud_limit(64), api="compute"),),
        16,
        False,
    ),
    Lift(
        "another place's higher limit lifts nothing",
        (),
        (replace(cloud_limit(64), place=EW4B),),
        16,
        False,
    ),
]


@pytest.mark.parametrize("row", LIFTS, ids=lambda r: r.id)
def test_a_refusal_is_lifted_by_a_higher_limit(row: Lift) -> None:
    base = parse_desired(text(s("a"), s("b"), s("c")))
    d_then = with_quotas(base, *row.then)
    memory = refused(d_then, FULL, row.refused_at)
    if row.restart:
        memory = from_dict(to_dict(memory))
    p = plan(with_quotas(base, *row.now), FULL, memory, now=10_000.0)
    went = [a.slot for a in p.actions if a.kind == Kind.CREATE]
    assert went == (["c"] if row.goes else [])
    if not row.goes:
        assert [h.action.slot for h in p.blocked] == ["c"]


def test_the_lifted_create_refused_again_at_the_new_limit_waits_for_the_next_rise() -> None:
    base = parse_desired(text(s("a"), s("b"), s("c")))
    memory = refused(base, FULL, 16)
    raised = with_quotas(base, cloud_limit(24))
    (create,) = plan(raised, FULL, memory, now=10_000.0).actions
    again = classify(Operation.CREATE, code=429, message=refused_words(24))
    assert isinstance(again, QuotaExceeded)
    memory = outcome(create, again, memory, 10_000.0, None, 0.5).memory
    error = memory.error(f"{EW4A}/c:cloud")
    assert error is not None and error.quota is not None
    assert (error.quota.limit, error.quota.known) == (24, 24)
    assert plan(raised, FULL, memory, now=20_000.0).actions == ()
    assert [
        a.slot for a in plan(with_quotas(base, cloud_limit(32)), FULL, memory, 20_000.0).actions
    ] == ["c"]


def test_a_flex_start_refusal_counts_its_use_as_spot() -> None:
    """Flex-start is charged to the spot quota: the use under the quota that refused it is the
    spot use, so a spot request going away lifts it."""
    flex = s("c").replace("mode: spot", "mode: flex-start, max_run_duration: 1d")
    d = parse_desired(text(s("a"), s("b"), flex))
    memory = refused(d, FULL, 16)
    assert plan(d, FULL, memory, now=10_000.0).actions == ()
    assert [a.slot for a in plan(d, world(occupied("a")), memory, 101.0).actions] == ["b", "c"]
