"""One name per action, through the MCP SDK's own client: the canonical tools (``hold``,
``release``, ``race``, ``last_plan``, ``pause``, ``workload_set``) do the work, and each
deprecated name still works for this release as the same tool, its description saying whose
alias it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.model.load import parse_desired
from tests.integration.test_mcp_server import ALIASES, call, refused, session, tmp

__all__ = ["tmp"]  # the fixture

pytestmark = pytest.mark.integration


async def test_canonical_names_act_and_the_old_names_are_their_aliases(tmp: Path) -> None:
    file = tmp / "desired.yaml"
    async with session(tmp) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        for old, new in ALIASES.items():
            assert tools[old].input_schema == tools[new].input_schema, old
            assert tools[old].annotations == tools[new].annotations, old
            assert (tools[old].description or "").startswith(f"Deprecated alias of `{new}`")
        doc = await call(s, "hold", name="small", operation_id="h1")
        assert doc["kind"] == "hold" and doc["status"] == "changed"
        again = await call(s, "queue_slot", name="small", operation_id="h2")
        assert again["kind"] == "hold" and again["status"] == "unchanged"
        for tool in ("release", "cancel_slot"):
            assert "confirm" in await refused(s, tool, name="big")
        doc = await call(s, "release", name="big", operation_id="r1", confirm=True)
        assert parse_desired(file.read_text()).slot("big").want == "released"  # type: ignore[union-attr]
        doc = await call(s, "race", group="any-v6e8", slots=["cand-a", "cand-b"], count=2)
        assert doc["kind"] == "race"
        old = await call(s, "set_race_group", group="any-v6e8", slots=["cand-a", "cand-b"],
                         count=2)  # fmt: skip
        assert old["status"] == "unchanged"
        last, plan = await call(s, "last_plan"), await call(s, "plan")
        assert last.keys() == plan.keys() and last["plan"] == plan["plan"] is None
        doc = await call(s, "pause", name="big", operation_id="p1")
        assert parse_desired(file.read_text()).slot("big").hold.paused  # type: ignore[union-attr]
        # a verb of a group: the CLI's words joined (workload set: workload_set)
        doc = await call(s, "workload_set", name="small", operation_id="w1", command="python3 t.py")
        assert doc["kind"] == "set_workload" and doc["status"] == "changed"
        old = await call(s, "set_workload", name="small", operation_id="w2", command="python3 t.py")
        assert old["status"] == "unchanged"
        doc = await call(s, "workload_restart", name="small", operation_id="w3")  # not live
        assert parse_desired(file.read_text()).slot("small").workload.generation == 1  # type: ignore[union-attr]
