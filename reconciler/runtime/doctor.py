"""``doctor``: health checks as values, judged by pure functions, each problem with a fix hint.

A ``Check`` is ``(name, status, detail, hint)`` with status ``ok | warn | fail | skip``. The
``check_*`` functions here only judge facts that ``runtime.doctor_probes`` gathered (tool paths,
command results, file modes, the snapshot), so they are pure and tested without a machine to
break. A check whose prerequisite already failed is *skipped* and names that prerequisite, so
one problem is reported once (no "gcloud missing" followed by "not authenticated").

The document is ``tpu-reconciler.doctor.v1`` (docs/json.md); healthy means no ``fail``.

May: compute. May not: do I/O, read the clock (``now`` is an argument), print.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from reconciler.adapters.notify import guessable_topic
from reconciler.model.desired import Desired, Settings
from reconciler.model.durations import format_duration
from reconciler.model.stamps import epoch_or_none
from reconciler.model.status import StatusSnapshot
from reconciler.model.vocabulary import GCLOUD

SCHEMA: Final = "tpu-reconciler.doctor.v1"
Status = Literal["ok", "warn", "fail", "skip"]
#: A snapshot older than this many poll intervals means the controller is not making passes.
STALE_FACTOR: Final = 3.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


def healthy(checks: Sequence[Check]) -> bool:
    return all(c.status != "fail" for c in checks)


# --- settings when the file is invalid ---------------------------------------------------------


def lenient_settings(raw: Any, overrides: Mapping[str, str] | None = None) -> Settings:
    """The settings a broken file still says clearly: every key that validates on its own is
    kept, the rest fall back to defaults. Lets doctor judge the ntfy topic or the poll interval
    of a file that is invalid elsewhere."""
    fields = {**(raw if isinstance(raw, Mapping) else {}), **(overrides or {})}
    kept: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in Settings.model_fields:
            continue
        try:
            Settings.model_validate({**kept, key: value})
        except ValueError:
            continue
        kept[key] = value
    return Settings.model_validate(kept)


# --- the checks, in report order ---------------------------------------------------------------


def check_desired(path: str, desired: Desired | None, errors: Sequence[str]) -> Check:
    if desired is not None and not errors:
        races = len(desired.race_groups)
        return ok(
            "desired",
            f"{path} is valid ({_count(len(desired.slots), 'slot')}, "
            f"{_count(races, 'race group')})",
        )
    shown = "; ".join(errors[:3]) + (f" (+{len(errors) - 3} more)" if len(errors) > 3 else "")
    return Check(
        "desired",
        "fail",
        f"{path} is invalid: {shown or 'unknown error'}",
        "correct it (`tpu-reconciler validate` lists every error); a running controller keeps "
        "the last valid intent meanwhile"
        if not any("file not found" in e for e in errors)
        else f"create it: tpu-reconciler -f {path} init --project PROJECT",
    )


def check_project(desired: Desired | None, raw_project: Any) -> Check:
    if desired is not None:
        return ok("project", desired.project)
    if isinstance(raw_project, str) and raw_project:
        return ok("project", f"{raw_project} (from the file as written)")
    return skip("project", "no project in the file (see desired)")


def gcloud_needed(settings: Settings, token_source: str | None) -> str | None:
    """What needs gcloud, or None. ``token_source`` is the environment variable that hands the
    REST backend its token (``CLOUDSDK_AUTH_ACCESS_TOKEN[_FILE]``), if set."""
    if settings.backend == GCLOUD:
        return "the gcloud backend"
    if token_source is None and settings.credentials == "gcloud":
        return "access tokens for the REST backend (gcloud config config-helper)"
    return None


def check_gcloud(gcloud: str | None, needed_for: str | None) -> Check:
    if gcloud is not None:
        return ok("gcloud", gcloud)
    if needed_for is None:
        return skip("gcloud", "not found, and not needed: the token comes from the environment")
    return Check(
        "gcloud",
        "fail",
        f"gcloud not found on PATH; needed for {needed_for}",
        "install the Google Cloud SDK (https://cloud.google.com/sdk/docs/install) and put "
        "gcloud on PATH (for a systemd unit: re-run `tpu-reconciler service install`)",
    )


@dataclass(frozen=True, slots=True)
class AuthFacts:
    """What the probes learned about credentials. ``token_source`` names the environment
    variable the token comes from (None: gcloud); ``accounts`` is ``gcloud auth list`` (None
    when not asked); ``token_error`` why no token could be had (None: one was had, or the
    backend needs none of its own)."""

    token_source: str | None
    accounts: Sequence[Mapping[str, Any]] | None = None
    accounts_error: str | None = None
    token_error: str | None = None


#: ``AuthFacts.token_source`` of ``settings.credentials: adc`` (not an environment variable).
ADC_SOURCE = "Application Default Credentials"


def check_auth(facts: AuthFacts | None, gcloud_problem: bool) -> Check:
    if facts is not None and facts.token_source == ADC_SOURCE:
        if facts.token_error:
            return Check(
                "auth",
                "fail",
                facts.token_error,
                "set GOOGLE_APPLICATION_CREDENTIALS to a key or authorized-user file, run "
                "`gcloud auth application-default login`, or run on a VM with a service account",
            )
        return ok("auth", f"access token from {ADC_SOURCE} (settings.credentials: adc)")
    if facts is None or (gcloud_problem and facts.token_source is None):
        return skip("auth", "needs gcloud (see gcloud)")
    if facts.token_source is not None:
        if facts.token_error:
            return Check(
                "auth",
                "fail",
                facts.token_error,
                f"put a valid access token in ${facts.token_source}, or unset it to use gcloud",
            )
        return ok("auth", f"access token from ${facts.token_source}")
    if facts.accounts_error:
        return Check(
            "auth",
            "fail",
            f"gcloud auth list failed: {facts.accounts_error}",
            "run `gcloud auth list` yourself to see why",
        )
    active = [
        str(a.get("account"))
        for a in facts.accounts or ()
        if isinstance(a, Mapping) and a.get("status") == "ACTIVE"
    ]
    if facts.accounts is not None and not active:
        return Check(
            "auth", "fail", "gcloud has no active account", "run `gcloud auth login` (as this user)"
        )
    if facts.token_error:
        return Check(
            "auth",
            "fail",
            f"no access token for the REST backend: {facts.token_error}",
            "run `gcloud auth login`; check `gcloud auth print-access-token` works",
        )
    who = ", ".join(active) if active else "gcloud credentials"
    return ok("auth", who)


@dataclass(frozen=True, slots=True)
class ApiFacts:
    backend: str
    queued_resources: int = 0
    unreachable: Sequence[str] = ()
    error: str | None = None
    quota: str | None = None  # "p (settings.quota_project)": the quota project in use


def check_quota_project(facts: ApiFacts | None) -> Check:
    """Which project API quota is charged to (``X-Goog-User-Project`` / --billing-project)."""
    if facts is None or facts.quota is None:
        return skip("quota", "quota project not known: the TPU API was not reached")
    return ok("quota", f"quota project {facts.quota}")


def check_api(facts: ApiFacts | None, blocked_by: str | None) -> Check:
    if facts is None:
        return skip("tpu_api", f"not tried: {blocked_by or 'nothing to ask'}")
    if facts.error:
        return Check(
            "tpu_api",
            "fail",
            f"listing queued resources via {facts.backend} failed: {facts.error}",
            "check the project id, that the TPU API is enabled (gcloud services enable "
            "tpu.googleapis.com) and that your account may list TPUs there",
        )
    if facts.unreachable:
        return Check(
            "tpu_api",
            "warn",
            f"via {facts.backend}: unreachable zones {', '.join(facts.unreachable)}",
            "usually a passing outage; if it stays, check those zones exist and offer TPUs",
        )
    return ok("tpu_api", f"via {facts.backend}: {facts.queued_resources} queued resources seen")


@dataclass(frozen=True, slots=True)
class PathFacts:
    path: str
    uid: int
    mode: int  # permission bits only
    is_dir: bool


def check_state_dir(root: str, facts: Sequence[PathFacts] | None, my_uid: int) -> Check:
    """``facts[0]`` is the state directory itself, then its secrets."""
    if facts is None:
        return ok("state_dir", f"{root} does not exist yet (the controller creates it 0700)")
    if facts[0].mode & 0o2070 == 0o2070:  # a lab's, from `service install --shared`
        return _shared_state_dir(root, facts)
    foreign = [f for f in facts if f.uid != my_uid]
    if foreign:
        return Check(
            "state_dir",
            "fail",
            "not owned by you: " + ", ".join(f"{f.path} (uid {f.uid})" for f in foreign),
            f"chown -R {my_uid} {root}",
        )
    loose = [f for f in facts if f.mode & 0o077]
    if loose:
        listed = ", ".join(f"{f.path} ({f.mode:04o})" for f in loose)
        world = any(f.mode & 0o007 for f in loose)
        return Check(
            "state_dir",
            "fail" if world else "warn",
            f"{'readable by others' if world else 'open to your group'}: {listed}",
            f"chmod -R go-rwx {root}",
        )
    return ok("state_dir", f"{root} (0700, yours)")


def _shared_state_dir(root: str, facts: Sequence[PathFacts]) -> Check:
    """A lab's state directory is its group's on purpose; only its secrets must stay private
    (a member other than the controller's user cannot list them, and sees none here). The rest
    of a lab's layout is ``doctor_lab``'s ``lab`` check."""
    loose = [f for f in facts[1:] if f.mode & 0o077]
    if loose:
        listed = ", ".join(f"{f.path} ({f.mode:04o})" for f in loose)
        return Check(
            "state_dir",
            "fail",
            f"secrets open to others: {listed}",
            f"chmod -R go-rwx {root}/secrets",
        )
    return ok("state_dir", f"{root} (a lab's: the group's, setgid and sticky; secrets private)")


def check_controller(pid: int | None) -> Check:
    if pid is None:
        return Check(
            "controller",
            "fail",
            "not running: nothing keeps desired.yaml true",
            "start it: tpu-reconciler run, or under systemd: tpu-reconciler service install",
        )
    return ok("controller", f"running (pid {pid})" if pid else "running (pid unknown)")


def _age(stamp: Any, now: float) -> float | None:
    moment = epoch_or_none(stamp)
    return None if moment is None else now - moment


def check_snapshot(
    snapshot: StatusSnapshot | None,
    problem: str | None,
    now: float,
    poll_interval: float,
    running: bool,
) -> Check:
    """``snapshot`` is status.json (None with ``problem`` when missing or unreadable)."""
    if snapshot is None:
        if not running:
            return skip("snapshot", f"{problem}; the controller is not running (see controller)")
        return Check(
            "snapshot",
            "fail",
            problem or "no snapshot",
            "the controller writes it after every pass; see `tpu-reconciler events`",
        )
    age = _age(snapshot.generated_at, now)
    if age is None:
        return Check(
            "snapshot", "fail", "status.json has no readable generated_at", "restart the controller"
        )
    limit = STALE_FACTOR * poll_interval
    if age > limit:
        if not running:
            return skip(
                "snapshot",
                f"{format_duration(age)} old; the controller is not running (see controller)",
            )
        return Check(
            "snapshot",
            "fail",
            f"stale: written {format_duration(age)} ago, more than 3 x poll_interval "
            f"({format_duration(limit)}); the controller is alive but not completing passes",
            "look at `tpu-reconciler events --since 1h` and the controller's log "
            "(journalctl --user -u 'tpu-reconciler@*'); restart it if it hangs",
        )
    observe_error = snapshot.observe_error
    if observe_error:
        return Check(
            "snapshot",
            "warn",
            f"{format_duration(age)} old; the last observation failed: {observe_error}",
            "see `tpu-reconciler events --since 1h`; the controller retries with backoff",
        )
    return ok("snapshot", f"{format_duration(age)} old")


def check_tmux(needed_by: Sequence[str] | None, tmux: str | None) -> Check:
    if needed_by is None:
        return skip("tmux", "desired.yaml is invalid (see desired)")
    if not needed_by:
        return skip("tmux", "no slot has setup.tmux")
    if tmux is None:
        return Check(
            "tmux",
            "fail",
            f"tmux not found; needed by setup.tmux of {_names(needed_by)}",
            "install tmux (apt-get install tmux), or set setup.tmux: false",
        )
    return ok("tmux", tmux)


def _names(slots: Sequence[str]) -> str:
    return ", ".join(slots[:3]) + (f" and {len(slots) - 3} more" if len(slots) > 3 else "")


@dataclass(frozen=True, slots=True)
class AgentFacts:
    socket: str | None
    keys: int = 0
    error: str | None = None


def check_ssh_agent(needed_by: Sequence[str] | None, facts: AgentFacts | None) -> Check:
    if needed_by is None:
        return skip("ssh_agent", "desired.yaml is invalid (see desired)")
    if not needed_by or facts is None:
        return skip("ssh_agent", "no slot has setup.bootstrap")
    hint = (
        "start an agent and add a key (eval $(ssh-agent); ssh-add); under systemd give the "
        "unit SSH_AUTH_SOCK (docs/operations.md)"
    )
    if not facts.socket:
        return Check(
            "ssh_agent",
            "fail",
            f"SSH_AUTH_SOCK is not set; bootstrap of {_names(needed_by)} forwards the agent",
            hint,
        )
    if facts.error:
        return Check("ssh_agent", "fail", facts.error, hint)
    if facts.keys == 0:
        return Check("ssh_agent", "fail", "the SSH agent holds no keys", "ssh-add <your key>")
    return ok("ssh_agent", f"{facts.keys} key{'s' if facts.keys != 1 else ''} in the agent")


@dataclass(frozen=True, slots=True)
class UserFacts:
    user: str | None
    cached: bool = False
    error: str | None = None


def oslogin_needed(desired: Desired | None) -> bool | None:
    if desired is None:
        return None
    if desired.settings.ssh_user:
        return False
    across = any(g.workload is not None for g in desired.race_groups)
    return across or any(
        s.setup.bootstrap or s.setup.tmux or s.setup.tailscale or s.workload is not None
        for s in desired.slots
    )


def check_oslogin(needed: bool | None, facts: UserFacts | None, blocked_by: str | None) -> Check:
    """``blocked_by`` names the failed check the lookup depends on (gcloud, auth), if any."""
    if needed is None:
        return skip("oslogin_user", "desired.yaml is invalid (see desired)")
    if not needed:
        return skip("oslogin_user", "not needed (settings.ssh_user is set, or nothing uses SSH)")
    if facts is None or (facts.user is None and blocked_by):
        return skip("oslogin_user", f"not cached, and the lookup needs gcloud (see {blocked_by})")
    if facts.user is None:
        return Check(
            "oslogin_user",
            "fail",
            f"the OS Login user could not be looked up: {facts.error}",
            "run `gcloud compute os-login describe-profile`, or set settings.ssh_user",
        )
    return ok("oslogin_user", facts.user + (" (cached)" if facts.cached else ""))


def check_ntfy(topic: str) -> Check:
    if not topic:
        return skip("ntfy_topic", "notices are off (settings.ntfy_topic is empty)")
    why = guessable_topic(topic)
    if why:
        return Check(
            "ntfy_topic",
            "warn",
            why,
            "choose a long random topic, e.g. tpu-$(openssl rand -hex 12), and subscribe to it",
        )
    return ok("ntfy_topic", "set, and not easy to guess")


# --- output ------------------------------------------------------------------------------------


def doctor_document(checks: Sequence[Check]) -> dict[str, Any]:
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail", "skip")}
    return {
        "schema_version": SCHEMA,
        "healthy": healthy(checks),
        "counts": counts,
        "checks": [c.to_dict() for c in checks],
    }


_LABEL: Final = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def format_doctor(checks: Sequence[Check]) -> str:
    width = max((len(c.name) for c in checks), default=0)
    lines = []
    for c in checks:
        lines.append(f"{_LABEL[c.status]:<4}  {c.name:<{width}}  {' '.join(c.detail.split())}")
        if c.hint and c.status in ("warn", "fail"):
            lines.append(f"{'':<4}  {'':<{width}}  fix: {c.hint}")
    fails = sum(c.status == "fail" for c in checks)
    warns = sum(c.status == "warn" for c in checks)
    verdict = _count(fails, "problem") if fails else "healthy"
    if warns:
        verdict += f", {_count(warns, 'warning')}"
    lines += ["", f"doctor: {verdict}"]
    return "\n".join(lines) + "\n"
