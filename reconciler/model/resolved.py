"""The intent as the controller sees it, as YAML: ``tpu-reconciler validate --resolved``.

Every slot the file asks for, generators expanded, with the defaults, its API and what it is
there (the accelerator as the APIs name it, topology, hosts per slice, the machine type on
Compute Engine), the runtime version (TPU API) or boot image (Compute Engine) chosen for its
family, its race group, setup, holds and workload filled in; every setting
with its default or ``TPU_RECONCILER_*`` override (marked with the variable's name). Durations
and times are written as the file writes them (``30s``, ``365d``, ``2026-12-24T19:00:00Z``).
It describes, it is not a desired.yaml to load: a race candidate says ``race_group:``.
Pure: values in, text out.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.representer import RoundTripRepresenter

from reconciler.model.desired import NO_HOLD, Desired, Settings, SlotSpec, WorkloadSpec
from reconciler.model.durations import duration_text
from reconciler.model.ssh_proxy import SshProxy, resolve_proxy
from reconciler.model.times import utc_text

_HEADER: Final = (
    "# {source} as the controller sees it: generators expanded, defaults and environment\n"
    "# overrides applied. A description, not a file to load.\n"
)


def _flow(items: Sequence[Any]) -> CommentedSeq:
    seq = CommentedSeq(items)
    seq.fa.set_flow_style()
    return seq


def _settings(settings: Settings, from_env: Mapping[str, str]) -> CommentedMap:
    """Every setting in the model's order; ``from_env``: setting -> the variable that set it."""
    out = CommentedMap()
    hints = Settings.__annotations__
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if isinstance(value, float) and str(hints.get(name, "")).startswith("Seconds"):
            value = duration_text(value)
        elif isinstance(value, list):
            value = _flow(value)
        elif isinstance(value, dict):
            value = CommentedMap(value)
        elif name == "ssh_proxy":
            value = _proxy(resolve_proxy(value))
        out[name] = value
        if name in from_env:
            out.yaml_add_eol_comment(f"from ${from_env[name]}", name)
    return out


def _proxy(proxy: SshProxy) -> Any:
    """``iap``, ``none``, ``{jump: ...}`` or ``{command: [...]}`` (flow style)."""
    shown = proxy.as_yaml()
    if isinstance(shown, str):
        return shown
    out = CommentedMap((k, _flow(list(v)) if isinstance(v, list) else v) for k, v in shown.items())
    out.fa.set_flow_style()
    return out


def _workload(w: WorkloadSpec) -> CommentedMap:
    out = CommentedMap()
    out["command"] = w.command if isinstance(w.command, str) else _flow(list(w.command))
    if w.workdir is not None:
        out["workdir"] = w.workdir
    if w.env:
        out["env"] = CommentedMap(w.env)
    if w.secret_env:
        out["secret_env"] = CommentedMap(w.secret_env)
    out["restart"] = w.restart
    out["max_failures"] = w.max_failures
    if w.stall_after is not None:
        out["stall_after"] = duration_text(w.stall_after)
    out["stop_grace"] = duration_text(w.stop_grace)
    out["when_done"] = w.when_done
    out["generation"] = w.generation
    return out


def _slot(spec: SlotSpec) -> CommentedMap:
    out = CommentedMap()
    out["name"] = spec.name
    out["zone"] = spec.zone
    out["api"] = spec.api
    out["accelerator"] = spec.accelerator
    if spec.machine_type is not None:
        out["machine_type"] = spec.machine_type
    out["topology"] = spec.topology
    out["hosts"] = spec.hosts
    out["mode"] = spec.mode
    if spec.image is not None:
        out["image"] = spec.image
    else:
        out["runtime_version"] = spec.runtime_version
    if spec.race_group is not None:
        out["race_group"] = spec.race_group
    else:
        out["want"] = spec.want
    if spec.generated:
        out["generated"] = True
    if spec.slices > 1:
        out["slices"] = spec.slices
    if spec.valid_until_seconds is not None:
        out["valid_until"] = duration_text(spec.valid_until_seconds)
    setup = spec.setup
    flags = CommentedMap(
        bootstrap=setup.bootstrap,
        tailscale=setup.tailscale,
        tmux=setup.tmux,
        generation=setup.generation,
        scripts=_flow(list(setup.scripts)),
    )
    flags.fa.set_flow_style()
    out["setup"] = flags
    if not spec.ssh_proxy.direct:
        out["ssh_proxy"] = _proxy(spec.ssh_proxy)
    hold = spec.hold
    if hold != NO_HOLD:
        if hold.start_at is not None:
            out["start_at"] = utc_text(hold.start_at)
        if hold.start_after_seconds is not None:
            out["start_after"] = duration_text(hold.start_after_seconds)
        if hold.hold_for_seconds is not None:
            out["hold_for"] = duration_text(hold.hold_for_seconds)
        if hold.hold_until is not None:
            out["hold_until"] = utc_text(hold.hold_until)
        if hold.paused:
            out["paused"] = True
    if spec.workload is not None:
        out["workload"] = _workload(spec.workload)
    return out


def resolved_document(desired: Desired, from_env: Mapping[str, str] | None = None) -> CommentedMap:
    """The resolved intent as YAML-ready mappings (``from_env``: setting or ``project`` ->
    the ``TPU_RECONCILER_*`` variable that set it, noted next to the value)."""
    from_env = from_env or {}
    doc = CommentedMap()
    doc["project"] = desired.project
    if "project" in from_env:
        doc.yaml_add_eol_comment(f"from ${from_env['project']}", "project")
    doc["settings"] = _settings(desired.settings, from_env)
    doc["slots"] = CommentedSeq(_slot(s) for s in desired.slots)
    groups = CommentedSeq()
    for g in desired.race_groups:
        group = CommentedMap(name=g.name, count=g.count, slots=_flow(list(g.slots)))
        if g.paused:
            group["paused"] = True
        groups.append(group)
    doc["race_groups"] = groups
    if desired.quotas:  # chip limits and a lab's members: shown only when the file has them
        doc["quotas"] = CommentedSeq(
            CommentedMap(
                [
                    ("family", q.family),
                    ("mode", q.mode),
                    ("api", q.api),
                    (q.scope, q.place),
                    ("chips", q.chips),
                ]
            )
            for q in desired.quotas
        )
    if desired.members:
        doc["members"] = CommentedMap(
            (m.name, CommentedMap(chips=CommentedMap(m.chips), priority=m.priority))
            for m in desired.members
        )
    return doc


class _Representer(RoundTripRepresenter):
    """``key: null``, not ``key:`` (which reads like a value forgotten). A subclass: adding a
    representer to ruamel's own class would change how edits write desired.yaml."""

    def represent_none(self, data: None) -> Any:
        return self.represent_scalar("tag:yaml.org,2002:null", "null")


_Representer.add_representer(type(None), _Representer.represent_none)


def format_resolved(desired: Desired, from_env: Mapping[str, str] | None = None) -> str:
    """``resolved_document`` as YAML text, under a comment saying what it is."""
    out = io.StringIO()
    y = YAML(typ="rt")
    y.width = 100
    y.indent(mapping=2, sequence=4, offset=2)
    y.Representer = _Representer
    y.dump(resolved_document(desired, from_env), out)
    return _HEADER.format(source=desired.source) + out.getvalue()
