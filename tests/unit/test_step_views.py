"""The race groups' view of a pass is computed again only when what it reads of memory
changed (``runtime.step.Views``)."""

from __future__ import annotations

import pytest

from reconciler.core import across
from reconciler.core import memory as mem
from reconciler.model.desired import Desired, Settings
from reconciler.model.observed import Observation
from reconciler.runtime import step


def test_the_view_is_kept_until_workloads_or_setup_records_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[mem.Memory] = []
    view = across.view

    def counted(d: Desired, o: Observation, m: mem.Memory) -> step.View:
        calls.append(m)
        return view(d, o, m)

    monkeypatch.setattr(step.across, "view", counted)
    views = step.Views(Desired(project="p", settings=Settings(), slots=()), Observation())
    memory = mem.Memory()
    first = views(memory)
    assert views(mem.record_notice(memory, "n1")) is first  # notices: not read by the view
    assert len(calls) == 1
    views(mem.record_setup(memory, "alpha", "bootstrap", "alpha@1", 0))  # a setup record
    assert len(calls) == 2
