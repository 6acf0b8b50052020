"""``tpu-reconciler emulator serve``: run the local Cloud TPU API emulator in the foreground.

Thin: parses options, starts ``reconciler.emulator.Emulator``, prints its URL and the
environment that points gcloud at it, and serves until Ctrl-C or SIGTERM. The emulator is
imported inside the handler so other commands never pay for it.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.surfaces.cli._say import err


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser("emulator", help="a local Cloud TPU API for demos and tests")
    verbs = group.add_subparsers(dest="emulator_command", metavar="VERB", required=True)
    p = verbs.add_parser("serve", help="serve the emulated API until interrupted")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    p.add_argument("--scenario", type=Path, default=None, help="scenario YAML (docs/emulator.md)")
    p.add_argument(
        "--speed",
        type=float,
        default=None,
        help="emulated seconds per real second (default: the scenario's, else 1; 0 freezes)",
    )
    p.add_argument(
        "--ip-pool",
        default=None,
        metavar="IPS",
        help="comma-separated external IPs handed to workers (default 203.0.113.x)",
    )
    p.add_argument("--project", default="emulated-project", help="project for the printed env")
    p.set_defaults(handler=f"{__name__}:serve")


def serve(args: argparse.Namespace) -> int:
    from reconciler.emulator import Emulator, Scenario, ScenarioError

    try:
        scenario = Scenario.load(args.scenario) if args.scenario else Scenario()
    except (OSError, ScenarioError) as exc:
        err(str(exc))
        return EX_USAGE
    pool = [ip.strip() for ip in args.ip_pool.split(",") if ip.strip()] if args.ip_pool else None
    try:
        emulator = Emulator(
            scenario, speed=args.speed, host=args.host, port=args.port, ip_pool=pool,
            project=args.project,
        )  # fmt: skip
        emulator.start()
    except (OSError, ValueError) as exc:
        err(f"cannot start the emulator: {exc}")
        return EX_REFUSED
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    config = Path(tempfile.mkdtemp(prefix="tpu-emulator-gcloud-"))
    token = config / "token"
    token.write_text("emulator-token\n", encoding="utf-8")
    try:
        print(
            f"Cloud TPU and Compute Engine API emulator on {emulator.url} "
            f"(speed {emulator.speed:g}x)",
            flush=True,
        )
        print("Point gcloud at it with:")
        for key, value in emulator.gcloud_env(str(config), str(token)).items():
            print(f"  export {key}={value}")
        print(f"Control API: {emulator.url}_emulator/state   (Ctrl-C to stop)", flush=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        emulator.stop()
        shutil.rmtree(config, ignore_errors=True)
    return EX_OK
