"""The TUI's logs pane against real workers: two sshd "workers" on 127.0.0.x (one common port,
as ``settings.ssh_port`` requires), a workload launched on both by the real ``WorkloadRunner``,
and the pane's default source — ``WorkloadRunner.logs`` for the node in the snapshot — showing
every worker's lines, ``[wN]``-prefixed, and following new ones."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.adapters.workload import WorkloadRunner
from reconciler.model.desired import Settings
from reconciler.model.observed import NetworkEndpoint, Node, NodeState
from reconciler.model.status import SetupStatus, SlotStatus, StatusSnapshot, TmuxStatus
from reconciler.model.workload import LaunchRequest
from reconciler.surfaces.tui._app import TpuApp
from reconciler.surfaces.tui._logs import default_source
from tests.fixtures.setup_world import one_port
from tests.fixtures.sshd import SshCluster
from tests.support.waiting import eventually

SLOT = "v4-node"
RUN = "run-1"

pytestmark = pytest.mark.integration


async def test_logs_pane_follows_every_worker(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path
) -> None:
    cluster = sshd_cluster(2)
    port = one_port(cluster)
    ips = tuple(a for host in cluster.hosts for a, _ in host.listen)
    node = Node(
        name=SLOT,
        zone="us-central2-b",
        state=NodeState.READY,
        uid="4242",
        endpoints=tuple(NetworkEndpoint(ip) for ip in ips),
    )
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\n"
        f"settings: {{ssh_user: {cluster.user}, ssh_key: {cluster.client_key}, "
        f"ssh_port: {port}}}\n"
        f"slots:\n  - {{name: {SLOT}, zone: us-central2-b, accelerator: v4-16, want: held}}\n"
    )
    state = StateDir(tmp_path / "state").ensure()
    row = SlotStatus(
        name=SLOT,
        zone="us-central2-b",
        accelerator="v4-16",
        state="ACTIVE",
        ips=ips,
        instance=node.instance,
        managed=True,
        setup=SetupStatus(),
        tmux=TmuxStatus(),
    )
    write_status(state.status, StatusSnapshot(slots=(row,)))
    (tmp_path / "home").mkdir(exist_ok=True)
    marks = tmp_path / "marks"
    marks.mkdir()
    runner = WorkloadRunner(
        state=state, settings=Settings(ssh_port=port), user=cluster.user, key=cluster.client_key
    )
    request = LaunchRequest(
        slot=SLOT,
        run_id=RUN,
        attempt=1,
        command=(
            'echo "hello from $TPU_RECONCILER_WORKER"; while [ ! -e go ]; do sleep 0.05; done; '
            'echo "step 2 on $TPU_RECONCILER_WORKER"'
        ),
        workdir=str(marks),
        env={},
        secret_env={},
        workers=2,
    )
    source = default_source(path, state)
    try:
        await runner.launch(node, request)
        app = TpuApp(path, state, log_source=source, watch=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("l")
            log = app.query_one("#logs")

            def shown() -> str:
                return "\n".join(str(line.text) for line in log.lines)  # type: ignore[attr-defined]

            assert await eventually(
                lambda: "[w0] hello from 0" in shown() and "[w1] hello from 1" in shown(), 30
            ), shown()
            (marks / "go").touch()  # both go on: the pane follows
            assert await eventually(
                lambda: "[w0] step 2 on 0" in shown() and "[w1] step 2 on 1" in shown(), 30
            ), shown()
            await pilot.press("q")
    finally:
        with contextlib.suppress(Exception):
            await runner.stop(node, SLOT, RUN, 1, grace=0.2)
        await runner.aclose()


async def test_logs_pane_on_an_emulated_node_says_nothing_answers_there(tmp_path: Path) -> None:
    """No user is configured or cached: the pane names the real reason (an emulated node's
    address), not the missing user, and dials nothing."""
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\n"
        f"slots:\n  - {{name: {SLOT}, zone: us-central2-b, accelerator: v4-8, want: held}}\n"
    )
    state = StateDir(tmp_path / "state").ensure()
    row = SlotStatus(
        name=SLOT,
        zone="us-central2-b",
        accelerator="v4-8",
        state="ACTIVE",
        ips=("203.0.113.9",),
        instance=f"{SLOT}@4242",
        managed=True,
        setup=SetupStatus(),
        tmux=TmuxStatus(),
    )
    write_status(state.status, StatusSnapshot(slots=(row,)))
    app = TpuApp(path, state, log_source=default_source(path, state), watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("l")
        log = app.query_one("#logs")

        def shown() -> str:
            return "\n".join(str(line.text) for line in log.lines)  # type: ignore[attr-defined]

        # folded to the pane's width at 80 columns, not cut off mid-sentence
        assert await eventually(
            lambda: "no machine stands behind it" in " ".join(shown().split()), 10
        ), shown()
        assert all(len(line) <= 80 for line in shown().splitlines())
        assert "no SSH user" not in shown()
        await pilot.press("q")
