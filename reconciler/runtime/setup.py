"""Setup steps on ACTIVE nodes, wired from settings to the adapters.

``LiveSetup`` is the controller's ``SetupRunner``: bootstrap scripts over asyncssh on every
worker, the Tailscale join (key from the 0600 secret store, sent on stdin), the tmux window
for worker 0, ntfy notices. It is also the controller's ``WorkloadPort``: launch, probe and
stop through one ``adapters.workload.WorkloadRunner`` (pooled connections, kept across passes
and rebuilt when the SSH settings change). It resolves what the adapters need — the SSH user
(settings or OS Login, cached), the key, the agent socket, the known_hosts pins, script paths
relative to desired.yaml, the way to each slot's workers (``ssh_proxy``: ``routes``, with IAP's
worker VM names read once per node from its guest attributes through a cloud of its own) — and
turns a failed worker into the error the controller backs off on. A ``setup.at_boot`` slot's
bootstrap over SSH (its node boots with another setup, or none) first gives the node's next
boots this setup (``runtime/ends.update_boot_script``, through that cloud).

Before a step dials a node it checks the node's addresses: an emulated node's (a documentation
range, ``adapters.ssh.check_dialable``) fails the step at once with ``NoMachine``, a permanent
error the slot shows, and nothing is looked up or dialled. The OS Login user (when
``settings.ssh_user`` is not set) comes from one ``oslogin.UserResolver`` per ``LiveSetup``,
asked only when a connection is about to be made: forty slots' steps in one pass share one
lookup, and a failed lookup is answered from memory (and the state dir's record) until its
backoff runs out — one gcloud per backoff window, never one per slot per pass. Each failed
lookup is logged once, as a warning naming ``settings.ssh_user``.

May: call adapters. May not: decide *whether* a step is due (the planner does) or record that
it is done (the controller does, on success).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.adapters.statedir import StateDir
from reconciler.core import boot_setup
from reconciler.core import workload as wl
from reconciler.core.across import LOST
from reconciler.core.plan import Action, Notice
from reconciler.core.workload_left import left_said
from reconciler.errors import PermanentError, SetupFailed
from reconciler.model.desired import Desired, Settings, SlotSpec
from reconciler.model.observed import Node, NodeState
from reconciler.model.workload import WorkerProbe

if TYPE_CHECKING:
    from reconciler.adapters.oslogin import UserResolver
    from reconciler.adapters.ssh_routes import SshRoutes
    from reconciler.adapters.ssh_values import Worker
    from reconciler.adapters.tmux import TmuxInventory
    from reconciler.adapters.worker_names import WorkerNames
    from reconciler.runtime.backends import Clouds

log = logging.getLogger(__name__)


class LiveSetup:
    def __init__(
        self,
        desired_path: Path,
        state: StateDir,
        env: Mapping[str, str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_dir = desired_path.expanduser().resolve().parent
        self.state = state
        self.env = dict(os.environ if env is None else env)
        self.clock = clock  # the OS Login lookup's backoff (the controller's clock in tests)
        self._mirrors: dict[str | None, Any] = {}
        self._http: Any = None
        self._runner: Any = None
        self._runner_key: tuple[object, ...] | None = None
        self._resolver: UserResolver | None = None
        self._names: WorkerNames | None = None
        #: the cloud for IAP's worker VM names (guest attributes) and at_boot's script
        self._clouds: Clouds | None = None

    # -- shared ------------------------------------------------------------------------------
    def _spec(self, desired: Desired, action: Action) -> SlotSpec:
        spec = desired.slot(action.slot)
        if spec is None:
            raise PermanentError(f"{action.slot} is no longer in the desired file")
        return spec

    def _key(self, settings: Settings) -> Path:
        from reconciler.adapters.ssh import DEFAULT_KEY

        return Path(settings.ssh_key).expanduser() if settings.ssh_key else DEFAULT_KEY.expanduser()

    @property
    def resolver(self) -> UserResolver:
        """The OS Login user, looked up at most once per backoff window."""
        if self._resolver is None:
            from reconciler.adapters.oslogin import UserResolver

            self._resolver = UserResolver(
                self.state.oslogin_user, env=self.env, clock=self.clock, report=_report_lookup
            )
        return self._resolver

    async def _user(self, settings: Settings) -> str:
        """``settings.ssh_user``, else the OS Login user; call only right before dialling."""
        if settings.ssh_user:
            return settings.ssh_user
        return await self.resolver.resolve()

    async def _options(self, settings: Settings) -> Any:
        from reconciler.adapters.hostkeys import HostKeyStore
        from reconciler.adapters.ssh import SshOptions

        return SshOptions(
            user=await self._user(settings),
            known_hosts=HostKeyStore(self.state.known_hosts),
            key_path=self._key(settings),
            agent_path=self.env.get("SSH_AUTH_SOCK") or None,
            concurrency=settings.ssh_concurrency,
        )

    def _refuse_emulated(self, slot: str, settings: Settings, node: Node) -> None:
        from reconciler.adapters.ssh import check_dialable

        check_dialable(slot, node.ips(internal=settings.internal_ips))

    def routes(self, desired: Desired) -> SshRoutes:
        """How ``desired``'s slots reach their workers (``ssh_proxy``); IAP's worker VM names
        are looked up once per node instance and kept in the state dir for the CLI."""
        from reconciler.adapters.ssh_routes import SshRoutes
        from reconciler.adapters.worker_names import WorkerNames

        if self._names is None:
            self._names = WorkerNames(self.state.worker_names, persist=True)

        async def lookup(zone: str, node: str) -> list[dict[str, Any]]:
            cloud = await self._cloud_for(desired)
            rows: list[dict[str, Any]] = await cloud.guest_attributes(zone, node)
            return rows

        return SshRoutes(desired, self._names, lookup)

    async def _cloud_for(self, desired: Desired) -> Any:
        """The cloud of ``desired``, rebuilt when what chooses it changes (``Clouds``)."""
        if self._clouds is None:
            from reconciler.runtime.backends import Clouds, make_cloud

            env = self.env
            self._clouds = Clouds(lambda d: make_cloud(d, env))
        return await self._clouds(desired)

    async def _workers(self, desired: Desired, slot: str, node: Node) -> tuple[Worker, ...]:
        """The node's workers, each with its hop (``ssh_proxy``); NoMachine when no machine
        stands behind their addresses."""
        from reconciler.adapters.ssh import check_dialable, workers_of

        settings = desired.settings
        ips = node.ips(internal=settings.internal_ips)
        if not ips:
            raise SetupFailed(f"{node.name} has no network endpoints yet", delay=10.0)
        check_dialable(slot, ips)
        workers = workers_of(ips, port=settings.ssh_port)
        return await self.routes(desired).workers(node, slot, workers)

    # -- steps -------------------------------------------------------------------------------
    async def bootstrap(self, desired: Desired, action: Action, node: Node) -> None:
        from reconciler.adapters.ssh import bootstrap, log_dir_for, resolve_scripts

        spec = self._spec(desired, action)
        workers = await self._workers(desired, spec.name, node)
        if not spec.setup.scripts and not spec.setup.telemetry:
            raise PermanentError(
                f"{spec.name}: setup.bootstrap is on but no scripts are configured "
                "(settings.setup_scripts or the slot's setup.scripts)"
            )
        scripts = resolve_scripts(self.base_dir, spec.setup.scripts)
        if spec.setup.at_boot and not boot_setup.boots_with(spec, node):
            # first, so a failure here sends nothing: its next boots run this generation
            from reconciler.runtime.ends import update_boot_script

            await update_boot_script(await self._cloud_for(desired), spec, node, self.base_dir)
        if spec.setup.telemetry:  # the chip probe's client, in a private venv on the worker
            from reconciler.adapters.telemetry import setup_script

            scripts += (setup_script(),)
        settings = desired.settings
        result = await bootstrap(
            node.instance,
            workers,
            scripts,
            log_dir_for(self.state.logs, spec.name, node.instance),
            await self._options(settings),
        )
        result.raise_for_failure()

    async def tailscale(self, desired: Desired, action: Action, node: Node) -> None:
        from reconciler.adapters import tailscale
        from reconciler.adapters.secrets import SecretStore
        from reconciler.adapters.ssh import log_dir_for

        spec = self._spec(desired, action)
        settings = desired.settings
        workers = await self._workers(desired, spec.name, node)
        # Missing or readable-by-others key file: SetupFailed with the fix in its message.
        key = tailscale.auth_key(SecretStore.in_state_dir(self.state.root))
        result = await tailscale.join(
            node.instance,
            workers,
            key,
            hostname=spec.name,
            log_dir=log_dir_for(self.state.logs, spec.name, node.instance),
            opts=await self._options(settings),
        )
        result.raise_for_failure()

    def _mirror(self, socket: str | None) -> Any:
        from reconciler.adapters.tmux import TmuxMirror

        if socket not in self._mirrors:
            self._mirrors[socket] = TmuxMirror(socket)
        return self._mirrors[socket]

    async def tmux(self, desired: Desired, action: Action, node: Node) -> None:
        from reconciler.adapters.hostkeys import check_trusted
        from reconciler.adapters.openssh import ssh_argv
        from reconciler.adapters.tmux import WantedWindow, session_name

        spec = self._spec(desired, action)
        settings = desired.settings
        worker0 = (await self._workers(desired, spec.name, node))[0]
        check_trusted(self.state.known_hosts)  # OpenSSH would read a member's copy as is
        argv = ssh_argv(
            user=await self._user(settings),
            ip=worker0.host,
            instance=node.instance,
            key=self._key(settings),
            known_hosts=self.state.known_hosts,
            port=settings.ssh_port,
            hop=worker0.hop,
        )
        agent = self.env.get("SSH_AUTH_SOCK")
        window = WantedWindow(
            session=session_name(desired.zone_code(spec.zone)),
            window=spec.name,
            argv=argv,
            environment={"SSH_AUTH_SOCK": agent} if agent else {},
        )
        await self._mirror(settings.tmux_socket).sync([window])

    async def tmux_inventory(
        self, settings: Settings, active: set[str]
    ) -> tuple[list[str], list[str]]:
        inventory: TmuxInventory = await self._mirror(settings.tmux_socket).inventory(active)
        return inventory.targets()

    async def notify(self, settings: Settings, notice: Notice) -> None:
        import httpx

        from reconciler.adapters import notify

        if self._http is None:
            self._http = httpx.AsyncClient(timeout=10.0)
        await notify.send(
            self._http,
            settings.ntfy_server,
            settings.ntfy_topic,
            title=notice.title,
            message=notice.message,
            tags=(notice.event,),
        )

    # -- workloads ---------------------------------------------------------------------------
    async def workload_runner(self, desired: Desired) -> Any:
        """The pooled runner for these SSH settings (also used by ``logs`` surfaces), reaching
        each slot's workers as its ``ssh_proxy`` says. The OS Login user is found by the runner
        when it opens a connection, not here."""
        from reconciler.adapters.workload import WorkloadRunner

        settings = desired.settings
        key = self._key(settings)
        agent = self.env.get("SSH_AUTH_SOCK") or None
        ssh = (settings.ssh_port, settings.internal_ips, settings.ssh_concurrency)
        wanted: tuple[object, ...] = (settings.ssh_user, key, agent, *ssh)
        if self._runner is None or self._runner_key != wanted:
            if self._runner is not None:
                await self._runner.aclose()
            self._runner = WorkloadRunner(
                state=self.state,
                settings=settings,
                user=settings.ssh_user or self.resolver.resolve,
                key=key,
                agent_path=agent,
            )
            self._runner_key = wanted
        self._runner.routes = self.routes(desired)
        return self._runner

    async def workload_launch(self, desired: Desired, action: Action, node: Node) -> str | None:
        """Launch the attempt; with ``setup.telemetry`` or ``workload.take_tpu`` first make
        sure no other process holds the chips (``adapters.telemetry.clear_before_launch``).
        Returns what was done besides the launch (stray holders stopped), if anything."""
        spec = self._spec(desired, action)
        if action.workload is None or spec.workload is None:
            raise PermanentError(f"{action.slot}: no workload to launch")
        self._refuse_emulated(spec.name, desired.settings, node)  # before any lookup
        await self._user(desired.settings)  # a failed lookup: one line, not one per worker
        runner = await self.workload_runner(desired)
        said = ""
        if spec.setup.telemetry or spec.workload.take_tpu:
            from reconciler.adapters.telemetry import clear_before_launch

            said = await clear_before_launch(
                runner,
                node,
                spec.name,
                take=spec.workload.take_tpu,
                grace=spec.workload.stop_grace,
            )
            if said:
                log.warning("%s: %s", spec.name, said)
        request = wl.launch_request(spec, action.workload, len(node.endpoints), node)
        await runner.launch(node, request)
        return said or None

    async def workload_stop(self, desired: Desired, action: Action, node: Node) -> str | None:
        """Stop the attempt; the text says which processes survived the kill deadline, or
        None when none did."""
        act = action.workload
        if act is None:
            raise PermanentError(f"{action.slot}: no workload attempt to stop")
        self._refuse_emulated(action.slot, desired.settings, node)
        await self._user(desired.settings)
        runner = await self.workload_runner(desired)
        if act.why == LOST and node.slices:  # a race group's program: stop it on the winners
            return left_said(await self._stop_survivors(runner, node, action.slot, act))
        return left_said(await runner.stop(node, action.slot, act.run_id, act.attempt, act.grace))

    @staticmethod
    async def _stop_survivors(
        runner: Any, node: Node, slot: str, act: wl.WorkloadAct
    ) -> dict[int, tuple[int, ...]]:
        """Stop the attempt on each READY slice of ``node`` (``core/across``'s remnant), every
        worker under the index it was launched with (slice ``s`` worker ``w`` is
        ``s * per_slice + w``), all at once; the first failure is raised after the others."""
        per = max((len(s.endpoints) for s in node.slices), default=0)
        stops = [
            runner.stop(s, slot, act.run_id, act.attempt, act.grace, first=i * per)
            for i, s in enumerate(node.slices)
            if s.state == NodeState.READY and s.endpoints
        ]
        results = await asyncio.gather(*stops, return_exceptions=True)
        errors = [e for e in results if isinstance(e, BaseException)]
        if errors:
            raise errors[0]
        return {w: pids for r in results if isinstance(r, dict) for w, pids in r.items()}

    async def workload_before_end(self, desired: Desired, action: Action, node: Node) -> str:
        """A workload's ``before_end`` on every worker (``adapters/workload_hook.py``)."""
        from reconciler.adapters.workload_hook import run_before_end

        spec = self._spec(desired, action)
        act, w = action.end, spec.workload
        if act is None or w is None or w.before_end is None:
            raise PermanentError(f"{action.slot}: no before_end to run")
        self._refuse_emulated(spec.name, desired.settings, node)
        await self._user(desired.settings)
        runner = await self.workload_runner(desired)
        attempt = wl.WorkloadAct("launch", act.run_id, act.attempt)
        req = replace(
            wl.launch_request(spec, attempt, len(node.endpoints), node),
            command=w.before_end.command,
        )
        said: str = await run_before_end(runner, node, req, act)
        return said

    async def workload_probe(
        self,
        desired: Desired,
        node: Node,
        slot: str,
        run_id: str,
        attempt: int,
        *,
        telemetry: bool = False,
    ) -> tuple[WorkerProbe, ...]:
        runner = await self.workload_runner(desired)
        probes: tuple[WorkerProbe, ...] = await runner.probe(
            node, slot, run_id, attempt, telemetry=telemetry
        )
        return probes

    async def workload_tail(
        self, desired: Desired, node: Node, slot: str, run_id: str, attempt: int, worker: int
    ) -> tuple[str, ...]:
        runner = await self.workload_runner(desired)
        stream = runner.logs(
            node,
            slot,
            worker=worker,
            attempt=attempt,
            lines=wl.TAIL_LINES,
            follow=False,
            run_id=run_id,
        )
        return tuple([line.text async for line in stream])

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.aclose()
            self._runner = None
        for mirror in self._mirrors.values():
            await mirror.aclose()
        self._mirrors.clear()
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._clouds is not None:
            await self._clouds.aclose()


def _report_lookup(error: SetupFailed) -> None:
    log.warning("%s", error.message)


def make_setup_runner(desired_path: Path, state: StateDir) -> LiveSetup:
    return LiveSetup(desired_path, state)
