"""The capacity port (``adapters.cloud.Cloud``) over the gcloud CLI: the TPU API's queued
resources are its capacity requests.

Purpose: carry out each ``Cloud`` call as one ``gcloud compute tpus ...`` run — an argument list
(never a shell), ``--format=json --project=P --quiet``, stdin from /dev/null, prompts disabled,
the caller's environment passed through (so every ``CLOUDSDK_*`` setting works), a timeout per
call (the process group is killed, the call is transient) and at most ``concurrency`` runs at
once. Arguments are built and validated in ``_gcloud_args``; output and stderr are read in
``_gcloud_output``; failures are classified by ``cloud_errors``, as for the REST backend.
May not: log, print, decide what to do, or put secrets in argv.

Observation cost does not grow with the number of slots: ``observe(zones)`` is one QR list and
one node list per zone (concurrently, under the bound), or one of each with ``--zone=-`` when
``zones`` is None. gcloud's JSON is read by ``adapters/tpu_api_parse``, as REST's is.

``settings.quota_project`` becomes ``--billing-project=P`` on every run (gcloud then sends it as
``X-Goog-User-Project``; without it gcloud applies its own ``billing/quota_project``). gcloud
has no command that reads a TPU operation, so ``get_operation`` asks the v2 REST API with
gcloud's own credentials (``config config-helper``) and the same endpoint override.

Trade-off: ``gcloud ... list --zone=-`` silently drops the API's ``unreachable[]``, so an
all-zones observation cannot tell "zone empty" from "zone not answered". Per-zone listing costs
two gcloud runs per zone (~0.7 s CPU each) but is the only way this backend can report a zone
it could not see: when either list of a zone fails, that zone lands in
``Observation.unreachable`` and its partial results are dropped (unknown, never empty), while
the other zones are still observed. Only when no zone at all could be observed does
``observe`` raise — ``PermanentCloudError`` if every zone failed permanently (for example
PERMISSION_DENIED), else ``TransientCloudError``. Callers that need safe absence should pass
the zones they use rather than None.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from reconciler.adapters import _gcloud_args as args
from reconciler.adapters import _gcloud_output as out
from reconciler.adapters.cloud import (
    CreateRequest,
    OperationStatus,
    Outcome,
    Submitted,
)
from reconciler.adapters.cloud_errors import DEFAULT_DELAY, Operation
from reconciler.adapters.tpu_api_boot import GuestAttributeBootReports
from reconciler.adapters.tpu_api_parse import (
    capability,
    check_api,
    node_from_api,
    request_from_api,
)
from reconciler.errors import CloudError, PermanentCloudError, TransientCloudError
from reconciler.model import names
from reconciler.model.capacity import CapacityRequest
from reconciler.model.observed import Node, Observation
from reconciler.model.vocabulary import GCLOUD

_ALREADY = Outcome.ALREADY
#: What this cloud can do: zone by zone (``--zone=-`` drops ``unreachable[]``); flex-start
#: through ``gcloud alpha``; operations are read back through REST.
CAPABILITY = capability(GCLOUD, observes_all_zones=False)


class GcloudCloud(GuestAttributeBootReports):
    """``Cloud`` through the gcloud CLI. Safe to share between tasks of one event loop."""

    capability = CAPABILITY

    def __init__(
        self,
        project: str,
        *,
        gcloud: str = "gcloud",
        env: Mapping[str, str] | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        quota_project: str | None = None,
        alpha_reads: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.project = names.check_project(project)
        self.quota_setting = names.check_project(quota_project) if quota_project else None
        self.alpha_reads = alpha_reads  # list QRs with `gcloud alpha` (flex-start's end time)
        self._gcloud = gcloud
        self._rest: Any = None  # a RestCloud for get_operation, made on first use
        environ = dict(os.environ if env is None else env)
        environ["CLOUDSDK_CORE_DISABLE_PROMPTS"] = "1"
        environ.setdefault("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "1")
        self._env = environ
        self._limit = asyncio.Semaphore(concurrency)
        self.requests_sent = 0  # gcloud runs so far (the metrics' requests per poll)
        self._timeout = timeout
        self._running: set[asyncio.subprocess.Process] = set()

    # --- Cloud -----------------------------------------------------------------------------

    async def observe(self, zones: Collection[str] | None) -> Observation:
        if zones is None:
            qrs, nodes = await self._observe_zone(args.ALL_ZONES)
            return Observation(requests=qrs, nodes=nodes, zones=None)
        wanted = sorted({names.check_zone(zone) for zone in zones})
        results = await asyncio.gather(
            *(self._observe_zone(zone) for zone in wanted), return_exceptions=True
        )
        qrs_all: list[CapacityRequest] = []
        nodes_all: list[Node] = []
        failed: dict[str, CloudError] = {}
        for zone, result in zip(wanted, results, strict=True):
            if isinstance(result, CloudError):
                failed[zone] = result
            elif isinstance(result, BaseException):
                raise result
            else:
                qrs_all.extend(result[0])
                nodes_all.extend(result[1])
        if wanted and len(failed) == len(wanted):
            raise _nothing_observed(failed)
        return Observation(
            requests=tuple(qrs_all),
            nodes=tuple(nodes_all),
            unreachable=frozenset(failed),
            zones=frozenset(wanted),
        )

    async def create_request(self, request: CreateRequest) -> Submitted:
        check_api(request.api)
        if request.startup_script is None:
            return await self._submit(Operation.CREATE, args.create_args(request))
        # setup.at_boot: the script goes through a private file (--metadata-from-file), not argv
        with tempfile.TemporaryDirectory(prefix="tpu-reconciler-") as private:
            path = os.path.join(private, "startup-script")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                f.write(request.startup_script)
            return await self._submit(Operation.CREATE, args.create_args(request, path))

    async def delete_request(self, api: str, zone: str, name: str, *, force: bool) -> Submitted:
        check_api(api)
        return await self._submit(Operation.DELETE, args.delete_args(zone, name, force=force))

    def _rest_cloud(self) -> Any:
        """The v2 REST API with gcloud's credentials, for what gcloud has no command for."""
        if self._rest is None:
            from reconciler.adapters.rest import RestCloud

            self._rest = RestCloud(
                self.project, env=self._env, quota_project=self.quota_setting, concurrency=2
            )
        return self._rest

    async def get_operation(self, name: str) -> OperationStatus | None:
        result: OperationStatus | None = await self._rest_cloud().get_operation(name)
        return result

    async def set_boot_script(
        self, api: str, zone: str, node: str, script: str, workers: int = 1
    ) -> None:
        """Through REST: ``tpu-vm update --metadata-from-file`` would replace every key, and
        ``--update-metadata`` would put the script in argv."""
        await self._rest_cloud().set_boot_script(api, zone, node, script)

    def quota_note(self) -> str:
        if self.quota_setting:
            return f"{self.quota_setting} (settings.quota_project, --billing-project)"
        return "gcloud's own billing/quota_project (gcloud backend)"

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        check_api(api)
        argv = args.describe_args(zone, name)
        data = await self._call(Operation.GET, argv)
        if data is _ALREADY:
            return None
        return out.parse_one(data, request_from_api, out.describe_command(argv))

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]:
        argv = args.guest_attributes_args(zone, node, query_path)
        # OTHER: a missing node is an error here, not an empty answer.
        data = await self._call(Operation.OTHER, argv)
        return out.guest_rows(data, out.describe_command(argv))

    async def aclose(self) -> None:
        """Kill any gcloud still running (the calls waiting on them fail transiently)."""
        for proc in list(self._running):
            _kill(proc)
        if self._rest is not None:
            await self._rest.aclose()
            self._rest = None

    # --- internals -------------------------------------------------------------------------

    async def _observe_zone(
        self, zone: str
    ) -> tuple[tuple[CapacityRequest, ...], tuple[Node, ...]]:
        qr_argv = args.list_args("queued-resources", zone, alpha=self.alpha_reads)
        node_argv = args.list_args("tpu-vm", zone)
        results: Sequence[Any] = await asyncio.gather(
            self._call(Operation.LIST, qr_argv),
            self._call(Operation.LIST, node_argv),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        qr_data, node_data = results
        return (
            out.parse_items(qr_data, request_from_api, out.describe_command(qr_argv)),
            out.parse_items(node_data, node_from_api, out.describe_command(node_argv)),
        )

    async def _submit(self, operation: Operation, argv: list[str]) -> Submitted:
        data = await self._call(operation, argv)
        if data is _ALREADY:
            return Submitted(Outcome.ALREADY)
        outcome = out.operation_outcome(operation, data, out.describe_command(argv))
        return Submitted(
            outcome, out.operation_name(data, self.capability) if outcome is Outcome.DONE else None
        )

    async def _call(self, operation: Operation, tail: Sequence[str]) -> Any:
        """Run gcloud; its JSON output, or ``Outcome.ALREADY`` when the failure means done."""
        argv = [self._gcloud, *tail, f"--project={self.project}", "--format=json", "--quiet"]
        if self.quota_setting:
            argv.append(f"--billing-project={self.quota_setting}")
        what = out.describe_command(argv)
        returncode, stdout, stderr = await self._run(argv, what)
        if returncode != 0:
            verdict = out.failure(operation, returncode, stderr.decode("utf-8", "replace"))
            if isinstance(verdict, Outcome):
                return verdict
            raise verdict
        return out.load_json(stdout, what)

    async def _run(self, argv: list[str], what: str) -> tuple[int, bytes, bytes]:
        async with self._limit:
            self.requests_sent += 1
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=self._env,
                    start_new_session=True,  # so a timeout can kill gcloud and its children
                )
            except (FileNotFoundError, PermissionError) as exc:
                raise PermanentCloudError(f"cannot run {self._gcloud!r}: {exc}") from None
            except OSError as exc:
                raise TransientCloudError(f"cannot start gcloud for {what}: {exc}") from None
            self._running.add(proc)
            try:
                stdout, stderr = await asyncio.wait_for(proc.communicate(), self._timeout)
            except TimeoutError:
                raise TransientCloudError(
                    f"gcloud {what} timed out after {self._timeout:g}s",
                    delay=DEFAULT_DELAY,
                    status="DEADLINE_EXCEEDED",
                ) from None
            finally:
                self._running.discard(proc)
                if proc.returncode is None:
                    _kill(proc)
                    with contextlib.suppress(ProcessLookupError):
                        await proc.wait()
            if proc.returncode is None or proc.returncode < 0:
                raise TransientCloudError(f"gcloud {what} was killed ({proc.returncode})")
            return proc.returncode, stdout, stderr


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _nothing_observed(failed: Mapping[str, CloudError]) -> CloudError:
    reasons = "; ".join(f"{zone}: {error.message}" for zone, error in failed.items())
    message = f"no zone could be observed ({reasons})"
    errors = list(failed.values())
    first = errors[0]
    if all(isinstance(error, PermanentCloudError) for error in errors):
        return PermanentCloudError(message, status=first.status, code=first.code)
    delay = max(
        (e.delay for e in errors if isinstance(e, TransientCloudError)), default=DEFAULT_DELAY
    )
    return TransientCloudError(message, delay=delay, status=first.status, code=first.code)
