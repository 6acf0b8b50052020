"""validate --resolved's document: the intent as the controller sees it, in the file's own
spellings (durations, times), read back as YAML."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML

from reconciler.model.load import parse_desired
from reconciler.model.resolved import format_resolved

TEXT = """\
project: my-project-123
settings:
  runtime_versions: {v4: my-runtime}
defaults:
  mode: on-demand
  setup: {bootstrap: true}
  workload: {restart: on-failure}
slots:
  - name: a
    zone: us-central2-b
    accelerator: v4-8
    want: held
    valid_until: 6h
    hold_until: 2026-12-24T20:00:00+01:00
    setup: {generation: 2, scripts: [one.sh]}
    workload: {command: train, env: {X: 1}}
"""


def resolved(env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    text = format_resolved(parse_desired(TEXT, "desired.yaml", env))
    return text, YAML(typ="safe").load(text)


def test_defaults_runtime_and_setup_are_filled_in() -> None:
    _, doc = resolved()
    (slot,) = doc["slots"]
    assert slot == {
        "name": "a",
        "zone": "us-central2-b",
        "api": "tpu",
        "accelerator": "v4-8",
        "topology": "2x2x1",
        "hosts": 1,
        "mode": "on-demand",
        "runtime_version": "my-runtime",
        "want": "held",
        "valid_until": "6h",
        "setup": {
            "bootstrap": True,
            "tailscale": False,
            "tmux": True,
            "generation": 2,
            "scripts": ["one.sh"],
        },
        "hold_until": "2026-12-24T19:00:00Z",
        "workload": {
            "command": "train",
            "env": {"X": "1"},
            "restart": "on-failure",
            "max_failures": 3,
            "stop_grace": "1m",
            "when_done": "keep",
            "generation": 0,
        },
    }
    assert doc["race_groups"] == []


def test_every_setting_is_shown_with_its_default_in_the_files_spelling() -> None:
    _, doc = resolved()
    settings = doc["settings"]
    assert (settings["poll_interval"], settings["history_retention"]) == ("30s", "365d")
    assert settings["quota_project"] is None and settings["backend"] == "rest"


def test_an_environment_override_is_applied_and_named() -> None:
    text, doc = resolved({"TPU_RECONCILER_BACKEND": "gcloud"})
    assert doc["settings"]["backend"] == "gcloud"
    assert text.startswith("# desired.yaml as the controller sees it")


def test_the_variable_is_named_next_to_the_value_it_set() -> None:
    desired = parse_desired(TEXT, "desired.yaml", {"TPU_RECONCILER_SSH_PORT": "2222"})
    text = format_resolved(desired, {"ssh_port": "TPU_RECONCILER_SSH_PORT"})
    assert "  ssh_port: 2222  # from $TPU_RECONCILER_SSH_PORT\n" in text
