#!/usr/bin/env python3
"""Generate docs/desired-reference.md from the pydantic models of desired.yaml.

Walks ``reconciler.model.desired_schema``: every model's fields with their type (as written in
the model, e.g. ``Seconds | None``), default, bounds and ``Field(description=...)``, then a
glossary of the named value types. The model is the single source: a field without a
description gets one from ``FALLBACK`` below, and the script names those fields so the text can
move into the model. ``tests/integration/test_golden_docs.py`` fails when the committed file
differs from a fresh generation.

    python scripts/gen_reference.py           # rewrite docs/desired-reference.md
    python scripts/gen_reference.py --check   # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import typing
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

from reconciler.model import accelerators as cat  # noqa: E402
from reconciler.model import desired_schema as d  # noqa: E402
from reconciler.model.durations import duration_text  # noqa: E402
from reconciler.model.load import env_overrides  # noqa: E402

OUT: Final = ROOT / "docs" / "desired-reference.md"

#: (model, YAML path shown as the heading)
SECTIONS: Final[tuple[tuple[type[BaseModel], str], ...]] = (
    (d.DesiredFile, "top level"),
    (d.Settings, "settings"),
    (d.Defaults, "defaults"),
    (d.Setup, "defaults.setup, slots[].setup, generate[].setup"),
    (d.SlotModel, "slots[]"),
    (d.RaceGroupModel, "race_groups[]"),
    (d.GeneratorModel, "generate[]"),
    (d.QuotaModel, "quotas[]"),
    (d.MemberModel, "members.NAME"),
    (d.SshProxyModel, "settings.ssh_proxy, slots[].ssh_proxy, generate[].ssh_proxy"),
    (
        d.WorkloadModel,
        "defaults.workload, slots[].workload, race_groups[].workload, generate[].workload",
    ),
    (
        d.BeforeEndModel,
        "before_end in defaults.workload, slots[].workload, race_groups[].workload, "
        "generate[].workload",
    ),
)

#: Descriptions for fields the model does not describe yet (move them into the model).
FALLBACK: Final[dict[tuple[str, str], str]] = {}

GLOSSARY: Final[dict[str, str]] = {
    "ProjectId": "a GCP project id: 6-30 lowercase letters, digits and hyphens, starting with a "
    "letter (legacy `domain.com:project` ids too)",
    "SlotName": "lowercase letters, digits and hyphens, starting with a letter, ending with a "
    "letter or digit, at most 63 characters",
    "ZoneName": "a zone that exists, like `us-central2-b`: one missing from tpu-reconciler's "
    "list (`model/tpu_zones.py`) is refused with a did-you-mean, unless "
    "`settings.allow_unknown_zones` is true",
    "RegionName": "a region like `europe-west4` (a zone without its letter; checked like zones)",
    "Accelerator": "an accelerator type that exists: "
    + ", ".join(f"`{g.family}-{g.sizes[0]}` ... `{g.family}-{g.sizes[-1]}`" for g in cat.CATALOGUE)
    + " (the sizes between: `model/accelerators.py`; one that does not exist is refused with "
    "the sizes); the number counts TensorCores (two a chip) for "
    + ", ".join(g.family for g in cat.CATALOGUE if g.cores_per_chip == 2)
    + ", chips for the rest; other spellings are read as the APIs' names: "
    + ", ".join(f"`{a}-N` as `{f}-N`" for a, f in cat.ALIASES.items()),
    "Family": "an accelerator family: "
    + ", ".join(
        f"`{g.family}`" + (f" (or {', '.join(f'`{a}`' for a in g.aliases)})" if g.aliases else "")
        for g in cat.CATALOGUE
    ),
    "MachineTypeName": "a Compute Engine TPU machine type: "
    + ", ".join(f"`{m}`" for m in cat.MACHINE_TYPES),
    "Topology": "chips per side: `2x4` (v5e, v6e), `4x4x4` (v4, v5p, tpu7x)",
    "ImageName": "a Compute Engine image: `projects/P/global/images/NAME` or "
    "`projects/P/global/images/family/FAMILY`",
    "RuntimeVersion": "a runtime version like `tpu-ubuntu2204-base`",
    "NetworkName": "a network or subnetwork name, or a full resource path",
    "UserName": "a POSIX user name (OS Login names look like `alice_example_com`)",
    "ZoneCode": "1-16 lowercase letters or digits",
    "Seconds": "a duration: seconds (`30`) or a number with a unit (`30s`, `2m`, `6h`, `1d`); "
    "more than 0, at most 366 days",
    "Moment": "a time in ISO 8601 with a UTC offset or `Z` (`2026-12-24T20:00:00+01:00`, "
    "`2026-12-24T19:00:00Z`); a time without one is refused",
    "Path": "a single-line string (paths are relative to desired.yaml)",
    "SocketName": "a tmux socket name: letters, digits, `_`, `.`, `-`",
    "Url": "an `http://` or `https://` URL",
    "MetricsSetting": "a port (`9464`, served on 127.0.0.1) or `IP:PORT` (`127.0.0.1:9464`, "
    "`[::1]:9464`; a non-loopback IP such as `0.0.0.0:9464` lets other machines scrape); "
    "host names and an empty host are refused",
    "Command": "a string (run by `bash -lc` on each worker) or a non-empty list of arguments",
    "EnvName": "an environment variable name: letters, digits and `_`, not starting with a digit "
    "and not `TPU_RECONCILER_*` (those are set for the program)",
    "EnvValue": "a plain string or number (never a secret: those go in `secret_env`)",
    "JumpHostText": "`[user@]host[:port]`: a POSIX user name, a DNS name or IP address (IPv6 "
    "in brackets), a port 1-65535 (default 22)",
    "ProxyArgument": "one argument of a proxy command, without control characters; `%h` (the "
    "worker's address), `%p` (the SSH port), `%n` (the node's name) and `%%` (a `%`) are "
    "filled in, any other `%` is refused",
    "SecretName": "a name in the secret store (`tpu-reconciler secret set NAME`): lowercase "
    "letters, digits and hyphens, starting with a letter",
}

_LITERALS: Final = {
    "Mode": d.Mode,
    "Want": d.Want,
    "Backend": d.Backend,
    "Restart": d.Restart,
    "WhenDone": d.WhenDone,
    "CredentialSource": d.CredentialSource,
    "QuotaSource": d.QuotaSource,
    "Across": d.Across,
    "Api": d.Api,
}


def _type(annotation: str) -> str:
    text = re.sub(r"Annotated\[int, Field\(ge=(\d+), le=(\d+)\)\]", r"int (\1-\2)", annotation)
    return text.replace("Model]", "]").replace("Model", "")


def _bounds(field: Any) -> str:
    lo = next((m.ge for m in field.metadata if hasattr(m, "ge")), None)
    hi = next((m.le for m in field.metadata if hasattr(m, "le")), None)
    least = next((m.min_length for m in field.metadata if hasattr(m, "min_length")), None)
    if lo is not None and hi is not None:
        return f" ({lo}-{hi})"
    return f" (at least {least})" if least else ""


def _yaml(value: Any, seconds: bool) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, BaseModel):
        shown = {k: v for k, v in value.model_dump().items() if v is not None and k != "scripts"}
        inner = ", ".join(f"{k}: {_yaml(v, False).strip('`')}" for k, v in shown.items())
        return f"`{{{inner}}}`"
    if isinstance(value, float) and seconds:
        return f"`{duration_text(value)}`"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    if value == [] or value == {}:
        return "`[]`" if value == [] else "`{}`"
    return f"`{value}`"


def _default(field: Any, annotation: str) -> str:
    if field.default_factory is not None:
        made = field.default_factory()
        if isinstance(made, BaseModel) and type(made).__name__ in {"Settings", "Defaults"}:
            return "see below"
        return _yaml(made, False)
    if field.default is PydanticUndefined:
        return "**required**"
    return _yaml(field.default, annotation.startswith("Seconds"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def section(model: type[BaseModel], heading: str, missing: list[str]) -> list[str]:
    lines = [f"## `{heading}`" if heading != "top level" else "## Top level", ""]
    doc = inspect.cleandoc(model.__doc__ or "").replace("``", "`").replace("\n", " ")
    if doc and not doc.startswith(model.__name__ + "("):
        lines += [doc, ""]
    lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    annotations = model.__annotations__
    for name, field in model.model_fields.items():
        annotation = str(annotations.get(name, field.annotation))
        described = field.description or FALLBACK.get((model.__name__, name))
        if field.description is None:
            missing.append(f"{model.__name__}.{name}")
        cells = (
            f"`{name}`",
            f"`{_type(annotation)}`{_bounds(field)}",
            _default(field, annotation),
            described or "",
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*lines, ""]


def glossary(used: str) -> list[str]:
    lines = ["## Value types", "", "| type | accepts |", "| --- | --- |"]
    for name, values in _LITERALS.items():
        choices = " \\| ".join(f"`{v}`" for v in typing.get_args(values))
        lines.append(f"| `{name}` | {choices} |")
    for name, text in GLOSSARY.items():
        lines.append(f"| `{name}` | {_cell(text)} |")
    unknown = sorted(
        set(re.findall(r"\b[A-Z][A-Za-z]+\b", used))
        - set(GLOSSARY)
        - set(_LITERALS)
        - {"None", "Annotated", "Field", "Setup", "Settings", "Defaults"}
        - {m.__name__ for m, _ in SECTIONS}
    )
    if unknown:
        raise SystemExit(f"gen_reference: add {', '.join(unknown)} to GLOSSARY")
    return [*lines, ""]


def generate() -> tuple[str, list[str]]:
    """The document, and the fields that lack a description in the model."""
    missing: list[str] = []
    env = sorted(
        env_overrides({f"TPU_RECONCILER_{n.upper()}": "x" for n in d.Settings.model_fields})
    )
    out = [
        "# desired.yaml reference",
        "",
        "<!-- Generated by scripts/gen_reference.py from reconciler/model/desired_schema.py. "
        "Do not edit: change the model and run `python scripts/gen_reference.py`. -->",
        "",
        'Unknown keys are errors (with a "did you mean"), so a typo never silently does '
        "nothing. An invalid file changes nothing: the "
        "controller keeps the last valid intent and reports `FILE:LINE:COL: message`. "
        "A commented example of every key: `desired.yaml.example`; a starter file: "
        "`tpu-reconciler init`.",
        "",
        "The file is read as YAML 1.2: `true` and `false` are booleans, `yes`, `no`, `on` and "
        "`off` are text; `017` is 17 (`0o17` is octal); `1:30` is text. A key may appear once "
        "in a mapping; anchors, aliases and `<<` merge keys work; a tag other than YAML's own "
        "(`!!str`, `!!int`, ...) is refused, and so is a `%YAML 1.1` line.",
        "",
        "Environment overrides: `TPU_RECONCILER_PROJECT` replaces `project`, and "
        "`TPU_RECONCILER_<KEY>` (the key in capitals) replaces these settings: "
        + ", ".join(f"`{n}`" for n in env)
        + ".",
        "",
    ]
    used = ""
    for model, heading in SECTIONS:
        out += section(model, heading, missing)
        used += " ".join(str(a) for a in model.__annotations__.values()) + " "
    out += glossary(used)
    return "\n".join(out), missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = parser.parse_args()
    text, missing = generate()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python scripts/gen_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    if missing:
        print(f"fields without a description in the model: {', '.join(missing)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
