"""The emulator's fast clock speeds transitions, not stamps: every time the API reports
(createTime, operation create / end times, operation ids) is a wall-clock time that has
already come, and a stamp once reported never changes."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import httpx

from reconciler.emulator import Emulator
from reconciler.emulator._records import Clock

ZONE = "us-central2-b"
BASE = "v2/projects/test-project/locations"


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _body(name: str) -> dict[str, Any]:
    node = {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base"}
    return {"spot": {}, "tpu": {"nodeSpec": [{"node": node, "nodeId": name}]}}


def _stamps(doc: Any) -> list[str]:
    """Every ``...Time`` value anywhere in an API document."""
    found: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key.endswith("Time") and isinstance(value, str):
                found.append(value)
            else:
                found += _stamps(value)
    elif isinstance(doc, list):
        for item in doc:
            found += _stamps(item)
    return found


def test_a_fast_clock_never_stamps_a_time_ahead_of_the_wall_clock() -> None:
    with Emulator(speed=3600) as emu, httpx.Client(base_url=emu.url, timeout=10) as http:
        created = http.post(
            f"{BASE}/{ZONE}/queuedResources", params={"queuedResourceId": "a"}, json=_body("a")
        ).json()
        time.sleep(0.2)  # 12 emulated minutes: the QR is ACTIVE, its operation done
        emu.advance(7200)  # and two more emulated hours at once
        emu.preempt(ZONE, "a")
        op = http.get(f"{BASE}/{created['name'].split('/locations/')[1]}").json()
        qr = http.get(f"{BASE}/{ZONE}/queuedResources/a").json()
        node = http.get(f"{BASE}/{ZONE}/nodes/a").json()
        wall = time.time()
    assert emu.now() > 7200  # the transitions did run fast...
    assert qr["state"]["state"] == "SUSPENDED" and op["done"] is True
    stamps = _stamps([created, op, qr, node])
    assert len(stamps) >= 5, stamps  # createTime x3 (op, QR, node), endTime, response's
    for stamp in stamps:  # ...yet no reported time lies ahead of the wall clock
        assert _epoch(stamp) <= wall, (stamp, wall)
    millis = int(op["name"].rsplit("operation-", 1)[1].split("-")[0])
    assert millis / 1000 <= wall
    # the same QR described again reports the same times
    assert _epoch(qr["createTime"]) == _epoch(emu.queued_resource(ZONE, "a")["createTime"])  # type: ignore[index]


def test_stamps_keep_their_order_and_never_move() -> None:
    clock = Clock(1000.0)
    clock.anchor(0.0, 1000.0, 60.0)  # started at wall 1000, 60 emulated s per wall s
    assert clock.wall(60.0) == 1001.0
    before = [clock.wall(t) for t in (0.0, 30.0, 60.0, 120.0)]
    clock.anchor(120.0, 1002.0, 0.0)  # at emulated 120 (wall 1002): jump...
    clock.anchor(3720.0, 1002.0, 60.0)  # ...one emulated hour, then run at 60x again
    assert [clock.wall(t) for t in (0.0, 30.0, 60.0, 120.0)] == before
    assert clock.wall(1000.0) == 1002.0  # a moment inside the jump came when the jump did
    assert clock.wall(3780.0) == 1003.0
    assert clock.wall(-10.0) == 990.0  # a scenario's past, counted back at speed 1
    walls = [clock.wall(t) for t in range(-100, 4000, 7)]
    assert walls == sorted(walls)


def test_absolute_times_parse_back_onto_the_emulated_clock() -> None:
    clock = Clock(1000.0)
    clock.anchor(0.0, 1000.0, 60.0)
    assert clock.parse(clock.stamp(600.0)) == 600.0  # wall 1010
    clock.anchor(600.0, 1010.0, 0.0)  # frozen from here on
    # a time ahead of a frozen clock stays ahead by as many emulated seconds
    assert clock.emulated(1070.0) == 660.0


def test_a_bare_world_clock_runs_at_speed_one_from_its_epoch() -> None:
    clock = Clock(1_700_000_000.0)
    assert clock.stamp(90.5) == "2023-11-14T22:14:50.500000Z"
    assert clock.parse("2023-11-14T22:14:50.500000Z") == 90.5
