"""A workload's ``before_end`` on every worker, over the workload runner's pooled SSH.

``run_before_end(runner, node, req, act)`` sends each worker ``wrapper hook <attempt dir>
<end key> <timeout ms>`` with a framed spec on stdin (``workload_wire.encode_hook_spec``: the
before_end's command, the workload's workdir, env and secret env, and ``TPU_RECONCILER_SLOT``,
``_RUN_ID``, ``_ATTEMPT``, ``_WORKER``, ``_WORKERS``, ``_END`` (the kind of end) and
``_END_TIME`` (RFC 3339)); the wrapper adds ``TPU_RECONCILER_PID``, the program's process
group. It runs in the attempt's directory's terms but not as part of the attempt (a stop does
not end it), bounded by the timeout, its output appended to the attempt's ``output.log``
between two banner lines, so ``logs`` shows it with the program's. The worker records the end
key before it runs anything and answers a resend ``already ...``: a run cut short by a lost
connection and sent again runs once per worker.

Every worker at once; the answers say how it went (``ran code=N`` / ``already ...``) and
become one line (``summary``). A worker that cannot be reached fails the call after the others
ran (``WorkloadError``, temporary: the controller backs off and sends it again, and the
workers that ran answer ``already``).

May: what the runner may. May not: decide when it runs (``core/before_end``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from reconciler.adapters.ssh import Worker, check_dialable
from reconciler.adapters.workload import WorkloadRunner
from reconciler.adapters.workload_pool import _Pooled
from reconciler.adapters.workload_wire import attempt_dir, check_attempt, encode_hook_spec
from reconciler.errors import UnsafeName, WorkloadError
from reconciler.model.ends import EndAct, check_end_key
from reconciler.model.names import check_name
from reconciler.model.observed import Node
from reconciler.model.workload import LaunchRequest, check_run_id

#: Seconds on top of the command's own timeout before the SSH call gives up on a worker.
_SLACK = 30.0


async def run_before_end(
    runner: WorkloadRunner, node: Node, req: LaunchRequest, act: EndAct
) -> str:
    """Run ``req.command`` (the before_end's) on every worker of ``node`` for attempt
    ``req.run_id``/``req.attempt`` and end ``act``; returns what happened, on one line."""
    check_name(req.slot)
    check_run_id(req.run_id)
    check_attempt(req.attempt)
    try:
        key = check_end_key(act.key)
    except ValueError as e:
        raise UnsafeName(str(e)) from None
    workers = runner.workers(node)
    if not workers:
        raise WorkloadError(f"{node.name} has no network endpoints yet")
    check_dialable(req.slot, (w.host for w in workers))
    timeout_ms = math.ceil(min(max(act.timeout, 1.0), 86400.0) * 1000)
    secrets = runner._secret_values(req)
    ours = {
        "SLOT": req.slot,
        "RUN_ID": req.run_id,
        "ATTEMPT": str(req.attempt),
        "WORKERS": str(len(workers)),
        "END": act.kind,
        "END_TIME": act.at,
    }

    async def job(pooled: _Pooled, worker: Worker) -> str:
        directory = attempt_dir(pooled.base, worker.index, req.slot, req.run_id, req.attempt)
        spec = encode_hook_spec(req, secrets, {**ours, "WORKER": str(worker.index)})
        command = pooled.command("hook", directory, key, timeout_ms)
        return await runner._command(
            pooled, command, timeout=timeout_ms / 1000 + _SLACK, stdin=spec
        )

    outcomes = await runner._everywhere(node, f"before_end of {req.slot} on", job, slot=req.slot)
    runner._raise_failures(node, f"before_end of {req.slot}", outcomes)
    return summary([o for o in outcomes if isinstance(o, str)])


def summary(answers: Sequence[str]) -> str:
    """``ran on 4 workers``, ``ran on 4 workers; exit 1 on worker 2``, ``... (1 had run it
    already)``: the workers' answers (``ran code=N`` or ``already ...``) on one line."""
    failed = []
    again = 0
    for index, answer in enumerate(answers):
        words = dict(w.partition("=")[::2] for w in answer.split()[1:])
        if answer.startswith("already"):
            again += 1
        code = words.get("code", "0")
        if code not in ("0", ""):
            failed.append(f"exit {code} on worker {index}")
    out = f"ran on {len(answers)} worker{'' if len(answers) == 1 else 's'}"
    if again:
        out += f" ({again} had run it already)"
    return out + (f"; {', '.join(failed)}" if failed else "")
