"""Control over the controller, as planner tables with a fixed ``now``: holds in time
(start_at / start_after on the create, hold_until, hold_for per node instance), suspend, paused,
and the delete guard with its confirmation. No I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import control
from reconciler.core.memory import Memory, from_dict, observe, to_dict
from reconciler.core.plan import Plan, plan
from reconciler.model.desired import Desired, HoldSpec, SlotSpec
from reconciler.model.observed import Observation
from tests.support.worlds import Z1, active, brief, desired, group, node, qr, setup, slot, world

T0 = 1_800_000_000.0  # a fixed "now" (2027-01-15T08:00:00Z)
H = 3600.0


def held(name: str, **hold: object) -> SlotSpec:
    return replace(slot(name), hold=HoldSpec(**hold))  # type: ignore[arg-type]


def decide(
    want: Desired,
    seen: Observation,
    *,
    now: float = T0,
    memory: Memory | None = None,
    confirmed: frozenset[str] = frozenset(),
) -> Plan:
    """One pass as the controller makes it: fold the observation in, then plan."""
    mem = observe(memory or Memory(), want, seen, now)
    return plan(want, seen, mem, now, confirmed=confirmed)


def served(want: Desired, seen: Observation, since: float) -> Memory:
    """Memory of a controller that saw ``seen`` first at ``since``."""
    return observe(Memory(), want, seen, since)


# --- start_at / start_after: the create carries the window ---------------------------------


@dataclass(frozen=True)
class Window:
    id: str
    hold: dict[str, object]
    valid_until: int | None
    after_seconds: int | None
    after_time: float | None


WINDOWS = [
    Window("start_after alone", {"start_after_seconds": 7200}, None, 7200, None),
    Window("start_at in the future", {"start_at": T0 + 5 * H}, None, None, T0 + 5 * H),
    Window("start_at already past: no start", {"start_at": T0 - H}, None, None, None),
    Window("start_at with valid_until", {"start_at": T0 + H}, 6 * 3600, None, T0 + H),
    Window("start_after with valid_until", {"start_after_seconds": 600}, 3600, 600, None),
    Window("no start", {}, 3600, None, None),
]


@pytest.mark.parametrize("row", WINDOWS, ids=lambda r: r.id)
def test_create_carries_the_start(row: Window) -> None:
    spec = replace(held("a", **row.hold), valid_until_seconds=row.valid_until)
    p = decide(desired(spec), world())
    assert brief(p) == [("+", "create", "a")]
    create = p.actions[0].create
    assert create is not None
    assert (create.valid_after_seconds, create.valid_after_time) == (
        row.after_seconds,
        row.after_time,
    )
    assert create.valid_until_seconds == row.valid_until


# --- hold_until / hold_for: released by the ordinary delete path ---------------------------


@dataclass(frozen=True)
class Timed:
    id: str
    hold: dict[str, object]
    since: float  # when the controller first saw it ACTIVE
    now: float
    actions: list[tuple[str, str, str]]
    releases_at: float | None = None


TIMED = [
    Timed("hold_until ahead: held, releases then", {"hold_until": T0 + H}, T0, T0, [], T0 + H),
    Timed(
        "hold_until reached: delete",
        {"hold_until": T0 + H},
        T0,
        T0 + H,
        [("-", "delete", "a")],
    ),
    Timed(
        "hold_for not served yet: held",
        {"hold_for_seconds": 8 * H},
        T0,
        T0 + 7 * H,
        [],
        T0 + 8 * H,
    ),
    Timed(
        "hold_for served: delete",
        {"hold_for_seconds": 8 * H},
        T0,
        T0 + 8 * H,
        [("-", "delete", "a")],
    ),
    Timed(
        "both: the earlier wins",
        {"hold_for_seconds": 8 * H, "hold_until": T0 + 2 * H},
        T0,
        T0,
        [],
        T0 + 2 * H,
    ),
]


@pytest.mark.parametrize("row", TIMED, ids=lambda r: r.id)
def test_timed_release(row: Timed) -> None:
    want = desired(held("a", **row.hold))
    seen = world(active("a"))
    p = decide(want, seen, now=row.now, memory=served(want, seen, row.since))
    assert brief(p) == row.actions
    assert p.releases_at.get("a") == row.releases_at
    if row.actions:
        assert p.decided_want["a"] == "released"
        assert p.actions[0].destructive  # an ACTIVE TPU: marked like any other
        assert "hold_" in p.actions[0].reason
        assert [n.event for n in p.notices] == ["released"]


def test_hold_for_counts_per_node_instance() -> None:
    """A preempted node re-created is a new instance: its own hold_for starts from zero."""
    want = desired(held("a", hold_for_seconds=8 * H))
    first = world(active("a", uid="1"))
    mem = served(want, first, T0)
    again = world(active("a", uid="2"))  # re-created after a preemption, seen at T0 + 7h
    mem = observe(mem, want, again, T0 + 7 * H)
    assert brief(plan(want, again, mem, T0 + 9 * H)) == []  # only 2h on the new instance
    assert brief(plan(want, again, mem, T0 + 15 * H)) == [("-", "delete", "a")]


def test_hold_for_stays_released_once_the_qr_is_gone_and_after_a_restart() -> None:
    want = desired(held("a", hold_for_seconds=H))
    seen = world(active("a"))
    mem = observe(served(want, seen, T0), want, seen, T0 + H)  # served
    restarted = from_dict(to_dict(mem))  # memory survives the controller's restart
    gone = world()
    p = decide(want, gone, now=T0 + 2 * H, memory=restarted)
    assert brief(p) == []  # not re-created
    assert p.decided_want["a"] == "released"


def test_a_changed_hold_for_is_a_new_intent() -> None:
    """Served 1h and released; the user asks for 2h instead: held (queued) again."""
    seen = world(active("a"))
    one = desired(held("a", hold_for_seconds=H))
    mem = observe(served(one, seen, T0), one, seen, T0 + H)
    two = desired(held("a", hold_for_seconds=2 * H))
    assert brief(decide(two, world(), now=T0 + 3 * H, memory=mem)) == [("+", "create", "a")]
    # ... and while it still runs, extending it keeps it for the longer time
    assert brief(decide(two, seen, now=T0 + 1.5 * H, memory=served(one, seen, T0))) == []


def test_race_hold_ran_out_does_not_race_again() -> None:
    """A race winner whose hold_for is served is released, and the group does not queue
    another candidate to replace it."""
    specs = (held("a", hold_for_seconds=H), held("b", hold_for_seconds=H))
    want = desired(*specs, groups=[group("g", "a", "b")])
    seen = world(active("a"))
    p = decide(want, seen, now=T0 + 2 * H, memory=served(want, seen, T0))
    assert brief(p) == [("-", "delete", "a")]
    assert p.decided_want == {"a": "released", "b": "released"}
    assert not p.races[0].open


# --- paused and suspend ------------------------------------------------------------------------


def test_paused_slot_gets_nothing_and_keeps_what_it_holds() -> None:
    paused_new = held("a", paused=True)
    paused_running = replace(held("b", paused=True), want="released")
    other = slot("c")
    p = decide(desired(paused_new, paused_running, other), world(active("b")))
    assert brief(p) == [("+", "create", "c")]
    assert sorted((h.action.kind.value, h.action.slot, h.gate) for h in p.gated) == [
        ("create", "a", "paused"),
        ("delete", "b", "paused"),
    ]


def test_paused_race_group_queues_nothing() -> None:
    specs = (held("a", paused=True), held("b", paused=True))
    p = decide(desired(*specs, groups=[group("g", "a", "b")]), world())
    assert brief(p) == []
    assert {h.action.slot for h in p.gated} == {"a", "b"}


def test_suspended_plans_everything_and_does_nothing() -> None:
    ready = replace(slot("c"), setup=setup(bootstrap=True, tmux=True))
    want = desired(slot("a"), slot("b", want="released"), ready, suspend=True)
    p = decide(want, world(active("b"), active("c", uid="2")))
    assert p.suspended
    assert brief(p) == []
    assert sorted((h.action.kind.value, h.action.slot) for h in p.gated) == [
        ("bootstrap", "c"),
        ("create", "a"),
        ("delete", "b"),
        ("tmux", "c"),
    ]
    assert all(h.gate == "suspended" and "resume" in h.why for h in p.gated)
    resumed = decide(replace(want, settings=want.settings.model_copy(update={"suspend": False})),
                     world(active("b"), active("c", uid="2")))  # fmt: skip
    assert sorted(brief(resumed)) == [
        ("+", "create", "a"),
        ("-", "delete", "b"),
        ("~", "bootstrap", "c"),
        ("~", "tmux", "c"),
    ]


# --- the delete guard --------------------------------------------------------------------------


def released(*names: str, **settings: object) -> Desired:
    return desired(*(slot(n, want="released") for n in names), **settings)


def three_active() -> Observation:
    return world(*(active(n, uid=str(i)) for i, n in enumerate(("a", "b", "c"))))


@dataclass(frozen=True)
class GuardRow:
    id: str
    want: Desired
    seen: Observation
    actions: list[tuple[str, str, str]]
    guarded: list[str] = field(default_factory=list)


GUARD = [
    GuardRow(
        "two ACTIVE deletes: at the limit, they go",
        released("a", "b"),
        world(active("a", uid="0"), active("b", uid="1")),
        [("-", "delete", "a"), ("-", "delete", "b")],
    ),
    GuardRow(
        "three ACTIVE deletes: all wait, the rest proceeds",
        desired(*(slot(n, want="released") for n in "abc"), slot("d")),
        three_active(),
        [("+", "create", "d")],
        ["a", "b", "c"],
    ),
    GuardRow(
        "deletes of QRs still queued are not guarded",
        released("a", "b", "c"),
        world(qr("a"), qr("b"), qr("c")),
        [("-", "delete", "a"), ("-", "delete", "b"), ("-", "delete", "c")],
    ),
    GuardRow(
        "a higher delete_guard lets three through",
        released("a", "b", "c", delete_guard=3),
        three_active(),
        [("-", "delete", "a"), ("-", "delete", "b"), ("-", "delete", "c")],
    ),
    GuardRow(
        "delete_guard 0 holds even one",
        released("a", delete_guard=0),
        world(active("a")),
        [],
        ["a"],
    ),
    GuardRow(
        "an emptied race group counts too",
        desired(
            slot("a"), slot("b"), slot("c"), groups=[replace(group("g", "a", "b", "c"), count=0)]
        ),
        three_active(),
        [],
        ["a", "b", "c"],
    ),
]


@pytest.mark.parametrize("row", GUARD, ids=lambda r: r.id)
def test_guard(row: GuardRow) -> None:
    p = decide(row.want, row.seen)
    assert sorted(brief(p)) == sorted(row.actions)
    assert sorted(h.action.slot for h in p.gated if h.gate == "guard") == row.guarded
    if row.guarded:
        assert p.guard is not None
        assert p.guard.fingerprint == control.fingerprint(p.guard.deletes)
        assert "tpu-reconciler confirm" in p.guard.why
    else:
        assert p.guard is None


def test_confirmation_lets_exactly_the_confirmed_set_through() -> None:
    want, seen = released("a", "b", "c"), three_active()
    guard = decide(want, seen).guard
    assert guard is not None
    p = decide(want, seen, confirmed=frozenset(guard.deletes))
    assert sorted(brief(p)) == [("-", "delete", "a"), ("-", "delete", "b"), ("-", "delete", "c")]
    assert p.guard is None and not p.gated


def test_a_later_change_needs_its_own_confirmation() -> None:
    seen = world(*(active(n, uid=str(i)) for i, n in enumerate("abcdef")))
    first = decide(released("a", "b", "c"), seen).guard
    assert first is not None
    p = decide(released(*"abcdef"), seen, confirmed=frozenset(first.deletes))
    # a, b, c were confirmed; d, e, f are a new set of three: they wait for their own
    assert sorted(brief(p)) == [("-", "delete", "a"), ("-", "delete", "b"), ("-", "delete", "c")]
    assert p.guard is not None
    assert sorted(h.action.slot for h in p.gated) == ["d", "e", "f"]
    assert p.guard.fingerprint != first.fingerprint


def test_a_confirmation_does_not_cover_a_recreated_node() -> None:
    want = released("a", "b", "c")
    old = decide(want, three_active()).guard
    assert old is not None
    recreated = world(*(active(n, uid=f"new-{n}") for n in "abc"))
    p = decide(want, recreated, confirmed=frozenset(old.deletes))
    assert brief(p) == [] and p.guard is not None


def test_confirmation_document_must_be_intact() -> None:
    ids = ["z/a@1", "z/b@2", "z/c@3"]
    good = control.confirmation(ids, digest="d1", now=1000.0)
    assert control.confirmed_deletes(good, digest="d1", now=1000.0) == frozenset(ids)

    def holds(document: object) -> bool:
        return bool(control.confirmed_deletes(document, digest="d1", now=1000.0))

    assert not holds({**good, "deletes": [*ids, "z/d@4"]})
    assert not holds({k: v for k, v in good.items() if k != "fingerprint"})
    assert not holds([])
    assert not holds({**good, "expires_at": "tomorrow"})
    assert not holds({**good, "expires_at": True})
    assert not holds(control.confirmation([], digest="d1", now=1000.0))


def test_a_confirmation_holds_only_under_its_intent_and_for_a_bounded_time() -> None:
    ids = ["z/a@1", "z/b@2", "z/c@3"]
    doc = control.confirmation(ids, digest="d1", now=1000.0)
    assert control.confirmed_deletes(doc, digest="d1", now=1000.0 + 60) == frozenset(ids)
    # Any later edit of desired.yaml (hold all, resume, ...) supersedes it.
    assert control.confirmed_deletes(doc, digest="d2", now=1000.0 + 60) == frozenset()
    assert control.confirmed_deletes(doc, digest=None, now=1000.0 + 60) == frozenset()
    # Forgotten, it expires.
    late = 1000.0 + control.CONFIRM_TTL
    assert control.confirmed_deletes(doc, digest="d1", now=late) == frozenset()


def test_a_confirmation_is_spent_once_superseded_expired_or_carried_out() -> None:
    ids = ["z/a@1", "z/b@2", "z/c@3"]
    doc = control.confirmation(ids, digest="d1", now=1000.0)
    present = {"z/a@1", "z/b@2", "z/c@3", "z/e@5"}
    assert not control.confirmation_spent(doc, digest="d1", now=1001.0, present=present)
    assert not control.confirmation_spent(doc, digest="d1", now=1001.0, present={"z/c@3"})
    assert control.confirmation_spent(doc, digest="d1", now=1001.0, present={"z/e@5"})
    assert control.confirmation_spent(doc, digest="d2", now=1001.0, present=present)
    assert control.confirmation_spent(
        doc, digest="d1", now=1000.0 + control.CONFIRM_TTL, present=present
    )
    assert control.confirmation_spent({"junk": 1}, digest="d1", now=1001.0, present=present)


def test_scheduled_releases_are_not_guarded_but_an_edit_making_them_due_is() -> None:
    names = ("a", "b", "c")
    seen = three_active()

    def until(t: float) -> Desired:
        return desired(*(held(n, hold_until=t) for n in names))

    scheduled = until(T0 + H)
    mem = observe(Memory(), scheduled, seen, T0)  # in force since T0
    p = plan(scheduled, seen, observe(mem, scheduled, seen, T0 + H), T0 + H)
    assert len(brief(p)) == 3 and p.guard is None
    # an edit setting hold_until in the past makes three deletes due at once: guarded
    edited = until(T0 - H)
    p = plan(edited, seen, observe(mem, edited, seen, T0 + 60), T0 + 60)
    assert brief(p) == [] and p.guard is not None


def test_guard_counts_only_what_it_holds_not_prunes_of_queued() -> None:
    seen = world(*(qr(n, Z1, QRState.ACTIVE) for n in "abc"), *(node(n, uid=n) for n in "abc"))
    p = decide(desired(prune=True), seen)
    assert brief(p) == [] and p.guard is not None and len(p.guard.deletes) == 3


# --- the file: validated like the rest ---------------------------------------------------------

FILE = """\
project: my-project-123
slots:
  - name: a
    zone: us-central2-b
    accelerator: v4-8
    want: held
    start_at: 2026-12-24T20:00:00+01:00
    hold_for: 8h
  - {name: b, zone: us-central2-b, accelerator: v4-8}
  - {name: c, zone: us-central2-b, accelerator: v4-8, hold_for: 1h}
race_groups:
  - name: g
    slots: [b, c]
    start_after: 10m
    hold_until: "2026-12-25T08:00:00Z"
    paused: true
generate:
  - zones: [us-east1-d]
    accelerators: {v6e-8: 1}
    want: held
    start_after: 2h
"""


def test_the_keys_resolve_on_slots_race_groups_and_generators() -> None:
    from reconciler.model.load import parse_desired

    d = parse_desired(FILE)
    a, b, c, gen = (d.slot(n) for n in ("a", "b", "c", "spot-v6e8-use1d-1"))
    assert a is not None and b is not None and c is not None and gen is not None
    assert a.hold == HoldSpec(start_at=1798138800.0, hold_for_seconds=8 * H)  # 19:00Z
    until = 1798185600.0  # 2026-12-25T08:00:00Z
    assert b.hold == HoldSpec(start_after_seconds=600, hold_until=until, paused=True)
    assert c.hold == HoldSpec(start_after_seconds=600, hold_for_seconds=H, hold_until=until,
                              paused=True)  # fmt: skip
    assert gen.hold == HoldSpec(start_after_seconds=7200)
    assert d.race_groups[0].paused


@pytest.mark.parametrize(
    ("edit", "where", "says"),
    [
        (("start_at: 2026-12-24T20:00:00+01:00", "start_at: 2026-12-24T20:00:00"),
         "7:15", "has no UTC offset"),
        (("start_at: 2026-12-24T20:00:00+01:00", "start_at: 2026-12-24"), "7:15", "a date"),
        (("hold_for: 8h", "hold_for: 8h\n    start_after: 1h"), "9:5", "not both"),
        (("hold_for: 8h", "hold_until: 2026-12-24T19:00:00Z"), "8:5", "not after start_at"),
        (("hold_for: 8h", "hold_fro: 8h"), "8:5", "did you mean 'hold_for'"),
        (("start_after: 2h", "start_after: soon"), "21:18", "duration"),
    ],
)  # fmt: skip
def test_bad_times_are_reported_where_they_are(
    edit: tuple[str, str], where: str, says: str
) -> None:
    from reconciler.errors import InvalidDesiredState
    from reconciler.model.load import parse_desired

    with pytest.raises(InvalidDesiredState) as e:
        parse_desired(FILE.replace(*edit))
    shown = [str(d) for d in e.value.diagnostics]
    assert any(d.startswith(f"desired.yaml:{where}: ") and says in d for d in shown), shown


# --- workloads: suspend and pause hold launches; when_done is a release rule -------------------


def paused_job(want: Desired) -> Desired:
    (spec,) = want.slots
    return replace(want, slots=(replace(spec, hold=HoldSpec(paused=True)),))


def test_suspend_and_pause_hold_a_workload_launch() -> None:
    from tests.unit.test_plan_workload import Run
    from tests.unit.test_plan_workload import held as with_job

    for want, rule in (
        (with_job(), None),
        (replace(with_job(), settings=with_job().settings.model_copy(update={"suspend": True})),
         "suspended"),
        (paused_job(with_job()), "paused"),
    ):  # fmt: skip
        p = Run(want).step()
        if rule is None:
            assert brief(p) == [("~", "launch", "a")]
        else:
            assert brief(p) == [] and [(h.action.kind.value, h.gate) for h in p.gated] == [
                ("launch", rule)
            ]


def test_when_done_release_is_a_release_rule() -> None:
    from tests.unit.test_plan_workload import JOB, Run, probes
    from tests.unit.test_plan_workload import held as with_job

    run = Run(with_job(replace(JOB, when_done="release")))
    run.running()
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0]))
    assert brief(p) == [("-", "delete", "a")]
    assert p.releases["a"].rule == "when_done"
    assert [n.event for n in p.notices if n.event == "released"] == ["released"]
