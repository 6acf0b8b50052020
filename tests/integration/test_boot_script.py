"""The ``setup.at_boot`` startup script run for real: bash, curl and a local stand-in for the
metadata server (the worker's index from ``agent-worker-number``, each report a PUT of the
``tpu-reconciler/setup`` guest attribute, ``Metadata-Flavor: Google`` required as the real one
does). It runs the setup scripts in order, as bootstrap would, and says how far it got."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.model.boot_script import parse_report, startup_script
from tests.support.http_stub import Quiet, serving
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ATTRS = "/computeMetadata/v1/instance/attributes/"
GUEST = "/computeMetadata/v1/instance/guest-attributes/tpu-reconciler/setup"


class Metadata:
    def __init__(self) -> None:
        self.url = ""
        self.reports: list[str] = []
        self.attributes = {"agent-worker-number": "2"}


@pytest.fixture
def metadata() -> Iterator[Metadata]:
    state = Metadata()

    class Handler(Quiet):
        def _flavoured(self) -> bool:
            if self.headers.get("Metadata-Flavor") == "Google":
                return True
            self.send_response(403)
            self.end_headers()
            return False

        def do_GET(self) -> None:
            value = state.attributes.get(self.path.removeprefix(ATTRS))
            if not self._flavoured():
                return
            if not self.path.startswith(ATTRS) or value is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(value.encode())

        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            if not self._flavoured():
                return
            if self.path == GUEST:
                state.reports.append(body)
            self.send_response(200 if self.path == GUEST else 404)
            self.end_headers()

    with serving(Handler) as port:
        state.url = f"http://127.0.0.1:{port}/computeMetadata/v1"
        yield state


def boot(text: str, metadata: Metadata, log: Path) -> int:
    """Run the startup script as the guest environment would (root, from /)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "TPU_RECONCILER_METADATA": metadata.url,
        "TPU_RECONCILER_BOOT_LOG": str(log),
        "TPU_RECONCILER_BOOT_STATE": str(log.with_name("state") / "boot-setup"),
    }
    done = subprocess.run(
        [require_tool("bash"), "-c", text], env=env, cwd="/", timeout=60,
        stdin=subprocess.DEVNULL, capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode


def test_it_runs_the_scripts_in_order_and_reports_each_step(
    metadata: Metadata, tmp_path: Path
) -> None:
    require_tool("curl")
    marks = tmp_path / "marks"
    first = (
        f'#!/bin/sh\necho "first $TPU_RECONCILER_WORKER $TPU_RECONCILER_AT_BOOT $PWD" >> {marks}\n'
    )
    second = f"echo 'second' >> {marks}\n"  # no shebang: run as a shell script
    text = startup_script(
        "alpha", 3, [("01-first.sh", first.encode()), ("02-b.sh", second.encode())]
    )
    assert boot(text, metadata, tmp_path / "boot.log") == 0
    assert marks.read_text().splitlines() == ["first 2 1 /", "second"]
    assert metadata.reports == [
        "g3 running 0/2",
        "g3 running 1/2 01-first.sh",
        "g3 running 2/2 02-b.sh",
        "g3 done",
    ]
    assert "boot setup done" in (tmp_path / "boot.log").read_text()
    state = tmp_path / "state" / "boot-setup"  # the same word on the worker, for anyone there
    assert state.read_text() == "g3 done\n" and state.stat().st_mode & 0o777 == 0o644


def test_a_failing_script_stops_the_rest_and_says_which(metadata: Metadata, tmp_path: Path) -> None:
    require_tool("curl")
    marks = tmp_path / "marks"
    metadata.attributes = {"tpu-worker-id": "5"}  # an adapter's own worker index
    scripts = [
        ("01-fails.sh", f'echo "w$TPU_RECONCILER_WORKER" >> {marks}; exit 7\n'.encode()),
        ("02-never.sh", f"echo never >> {marks}\n".encode()),
    ]
    assert boot(startup_script("alpha", 0, scripts), metadata, tmp_path / "boot.log") == 1
    assert marks.read_text().splitlines() == ["w5"]
    assert metadata.reports[-1] == "g0 failed 01-fails.sh exit 7"
    report = parse_report(metadata.reports[-1])
    assert report is not None and report.detail == "01-fails.sh exit 7"
