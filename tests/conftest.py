"""Test configuration: loads every fixture module under tests/fixtures/ as a plugin."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}"
    for p in (Path(__file__).parent / "fixtures").glob("*.py")
    if not p.stem.startswith("_")
)
