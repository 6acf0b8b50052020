"""Generated documentation cannot drift: docs/desired-reference.md is what
scripts/gen_reference.py makes from the model now, and docs/json.md names every schema."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_desired_reference_is_generated_from_the_current_model() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_reference_lists_every_settings_key() -> None:
    from reconciler.model.desired import Settings

    text = (ROOT / "docs" / "desired-reference.md").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert f"| `{name}` |" in text, name


def test_json_doc_covers_every_schema_the_code_prints() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "reconciler").rglob("*.py"))
    schemas = set(re.findall(r'"(tpu-reconciler\.[a-z-]+\.v[0-9]+)"', source))
    internal = {"tpu-reconciler.memory.v1", "tpu-reconciler.operations.v1"}
    documented = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")
    missing = sorted(s for s in schemas - internal if s not in documented)
    assert not missing, f"docs/json.md does not describe {missing}"
