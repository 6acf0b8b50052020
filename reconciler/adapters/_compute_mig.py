"""The BULK MIG slice path of ``adapters/compute.ComputeCloud``: a multi-host slot made step
by step, and the sweep of the templates and workload policies no MIG uses. The calls are
``adapters/_compute_calls.py``'s; the bodies ``adapters/compute_body.py``'s.

**Creates** (``MigSlices.create``): the instance template, the workload policy, then per slice
the MIG and its ``createInstances``, each step's operation waited for (``operations.wait``)
but the last, which is returned (a BULK MIG waits for capacity by itself, ``CREATING``). A
step that met its name already there is done when the resource is this slot's (a name another
slot's resource holds is a permanent error naming it). The cloud undoes what a failed create
made; a crash between steps leaves a template and policy no MIG uses (the sweep's) or a MIG
without hosts (read FAILED ``INCOMPLETE``: the planner replaces it).

**The sweep** removes our templates and workload policies that no MIG uses and that no
create of this process is making (or finished after the MIG list it reads began): one
template list (plus a delete per orphan), run in the background at the first look after a
start, whenever one of our MIGs disappeared since the last look, and every ``SWEEP_EVERY``
seconds otherwise — not every poll. A template names its policy in its description, and is
deleted only after its policy is gone, so nothing it anchors is lost.

May: send HTTP requests through ``adapters/_compute_calls``, remove the templates and
policies it made, log (as ``adapters.compute``). May not: decide what capacity to hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Final

from reconciler.adapters import compute_body as cb
from reconciler.adapters._compute_calls import ComputeCalls, done, failure
from reconciler.adapters.cloud import Outcome, Submitted
from reconciler.model.names import check_name
from reconciler.model.requests import CreateRequest

#: The cloud's own logger: a sweep's lines say ``reconciler.adapters.compute``.
log = logging.getLogger("reconciler.adapters.compute")

#: The sweep's pace (besides the first look and a MIG of ours gone).
SWEEP_EVERY: Final = 300.0


class MigSlices:
    """One cloud's MIG slices: its creates, and the sweep its looks start."""

    def __init__(self, calls: ComputeCalls) -> None:
        self._calls = calls
        #: the tokens of this process's creates, and when each finished (None: still running)
        self._made: dict[str, float | None] = {}
        #: our MIGs in the last look (None: no look yet)
        self._groups: frozenset[tuple[str, str]] | None = None
        self._sweep_at = 0.0
        #: the background sweep a look started
        self.sweep: asyncio.Task[None] | None = None

    async def aclose(self) -> None:
        if self.sweep is not None:
            self.sweep.cancel()
            with contextlib.suppress(BaseException):
                await self.sweep

    # --- create --------------------------------------------------------------------------

    @contextlib.contextmanager
    def making(self, token: str) -> Iterator[None]:
        """A create whose resources end in ``token`` runs inside: the sweep spares them until
        a MIG list begun after it ended."""
        self._made[token] = None
        try:
            yield
        finally:
            self._made[token] = self._calls.clock()

    async def create(
        self, request: CreateRequest, plan: cb.Layout, made: list[str], reservation: str | None
    ) -> Submitted:
        """Make ``plan``'s slices step by step; ``made`` gets the URL of each resource made."""
        base = self._calls.base
        template = cb.template_body(request, plan, reservation=reservation)
        policy = cb.policy_body(request, plan)
        await self._step(f"{base}global/instanceTemplates", template, made)
        await self._step(f"{base}regions/{plan.region}/resourcePolicies", policy, made)
        last: Submitted = Submitted(Outcome.ALREADY)
        zone = f"{base}zones/{plan.zone}/instanceGroupManagers"
        for k, name in enumerate(plan.parts):
            body = cb.group_body(self._calls.project, request, plan, k)
            if not await self._step(zone, body, made):
                await self._calls.owned("instanceGroupManagers", plan.zone, name, plan.slot)
                continue  # already this slot's: the planner sees it next look
            answer = await self._calls.mutate(
                "POST", f"{zone}/{name}/createInstances", body=cb.create_instances_body(plan, k)
            )
            if isinstance(answer, Outcome):  # pragma: no cover - a POST never yields ALREADY
                continue
            status = self._calls.status(answer)
            if status.failed:
                raise failure(status)
            last = done(status)
        return last

    async def _step(self, url: str, body: Mapping[str, Any], made: list[str]) -> bool:
        """Insert one resource and wait for its operation: True when made now, False when
        it was there already (409). Raises the step's failure."""
        answer = await self._calls.mutate("POST", url, body=body)
        if isinstance(answer, Outcome):
            return False
        made.append(f"{url}/{body['name']}")
        status = await self._calls.wait(answer)
        if status.failed:
            raise failure(status)
        return True

    # --- the sweep -----------------------------------------------------------------------

    def looked(
        self, groups: frozenset[tuple[str, str]], used: frozenset[str], listed: float
    ) -> None:
        """A look begun at ``listed`` saw our MIGs ``groups``, using the templates ``used``:
        start a sweep when one is due (a MIG of ours gone since the last look makes it due)."""
        if self._groups is not None and self._groups - groups:
            self._sweep_at = 0.0  # a MIG of ours is gone: its template and policy follow
        self._groups = groups
        now = self._calls.clock()
        if now < self._sweep_at or (self.sweep is not None and not self.sweep.done()):
            return
        self._sweep_at = now + SWEEP_EVERY
        self.sweep = asyncio.create_task(self._sweep_orphans(used, listed), name="compute-sweep")

    async def _sweep_orphans(self, used: frozenset[str], listed: float) -> None:
        """Delete our templates (and the policy each names) that no MIG uses. A create of
        this process still running, or finished after the MIG list began, is left alone
        (that list may not show its MIG yet)."""
        calls = self._calls
        try:
            templates = await calls.items(f"{calls.base}global/instanceTemplates", "items", None)
            self._made = {t: at for t, at in self._made.items() if at is None or at >= listed}
            fresh = set(self._made)
            for template in templates:
                name = template.get("name") if isinstance(template, dict) else None
                facts = cb.described(template.get("description")) if name else None
                if facts is None or name in used or _token(str(name)) in fresh:
                    continue
                await self._remove_orphan(str(name), facts.get("policy"))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the next sweep tries again; a look never fails for it
            log.warning("sweeping Compute Engine templates and policies failed: %s", e)
            self._sweep_at = min(self._sweep_at, calls.clock() + 60.0)

    async def _remove_orphan(self, template: str, policy: str | None) -> None:
        calls = self._calls
        if policy:
            parts = policy.split("/")
            if len(parts) != 4 or parts[0] != "regions" or parts[2] != "resourcePolicies":
                return
            url = f"{calls.base}regions/{parts[1]}/resourcePolicies/{check_name(parts[3])}"
            answer = await calls.mutate("DELETE", url)
            if not isinstance(answer, Outcome):
                status = await calls.wait(answer)
                if status.failed:
                    return  # still in use: the template stays too, for the next sweep
        log.info("removing orphaned Compute Engine template %s and its policy", template)
        url = f"{calls.base}global/instanceTemplates/{check_name(template)}"
        answer = await calls.mutate("DELETE", url)
        if not isinstance(answer, Outcome):
            await calls.wait(answer)


def _token(name: str) -> str:
    return name.rsplit("-", 1)[-1]


__all__ = ["SWEEP_EVERY", "MigSlices"]
