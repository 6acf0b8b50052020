"""The I/O side of ``doctor``: gather facts, then let ``runtime.doctor``'s pure checks judge them.

Probes: the desired file (parsed; its settings read leniently when it is invalid), tools on
``PATH`` (of the environment given, so a systemd unit's PATH can be checked), ``gcloud auth
list`` and an access token through the same provider the REST backend uses, one list call
through the configured backend, the state directory's owners and modes, the controller lock,
status.json, ``ssh-add -l``, the cached OS Login user (else one gcloud lookup); where they
apply, a lab's owner-checked state files and one Cloud Quotas read (``doctor_lab_probes``).

May: read files, stat, run gcloud / ssh-add (argument lists, stdin closed, timeouts, killed when
late), make read-only cloud list calls. May not: write or create anything (not even the
state directory: ``StateDir.secrets`` would create it, so paths are built by hand), print.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reconciler.adapters import gcloud_stderr
from reconciler.adapters.auth import TOKEN_ENV, TOKEN_FILE_ENV, GcloudAccessToken
from reconciler.adapters.cloud import zones_to_observe
from reconciler.adapters.disk_space import disk_of
from reconciler.adapters.lab import user_name
from reconciler.adapters.lab_layout import shared_file_owners
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import read_status
from reconciler.errors import InvalidDesiredState, ReconcilerError, StatusUnreadable
from reconciler.model.desired import Desired, Settings
from reconciler.model.load import env_overrides, parse_yaml
from reconciler.model.status import StatusSnapshot
from reconciler.model.vocabulary import REST
from reconciler.runtime import doctor as d
from reconciler.runtime import doctor_lab as dl
from reconciler.runtime import doctor_ssh as ds
from reconciler.runtime.backends import compute_wanted
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.doctor_compute import ComputeFacts, check_compute_api
from reconciler.runtime.doctor_disk import check_state_disk
from reconciler.runtime.doctor_lab_probes import probe_cloud_quotas, probe_lab
from reconciler.runtime.doctor_ssh_probes import (
    live_node,
    probe_key,
    probe_proxies,
    probe_reach,
)
from reconciler.runtime.lock import read_holder


async def _run(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> tuple[int, str, str]:
    """Exit code, stdout, stderr; ``-1`` and a message on timeout or when it cannot start."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as e:
        return -1, "", f"cannot run {argv[0]}: {e.strerror or e}"
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return -1, "", f"{Path(argv[0]).name} gave no answer within {timeout:g}s"
    rc = proc.returncode if proc.returncode is not None else -1
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _tail(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[-2:])[-300:] or "no output"


# --- the desired file --------------------------------------------------------------------------


def load_desired(
    path: Path, env: Mapping[str, str], owners: frozenset[int] | None = None
) -> tuple[Desired | None, list[str], Any]:
    """The parsed file (or None and its errors) and the raw YAML root, for lenient reading;
    ``owners``: in a lab, who may own the shared file (as the controller loads it)."""
    result = DesiredLoader(path, env, owners=owners).load()
    raw: Any = None
    if result.desired is None:
        with contextlib.suppress(OSError, UnicodeDecodeError, InvalidDesiredState):
            raw = parse_yaml(path.read_text(encoding="utf-8"), str(path))
    return result.desired, [str(e) for e in result.errors], raw


def _raw(root: Any, key: str) -> Any:
    return root.get(key) if isinstance(root, Mapping) else None


# --- credentials and the cloud -----------------------------------------------------------------


async def probe_auth(
    settings: Settings, token_source: str | None, gcloud: str | None, env: Mapping[str, str],
    timeout: float,
) -> d.AuthFacts:  # fmt: skip
    from reconciler.adapters.auth import token_provider_from_env

    if token_source is not None:
        try:
            await asyncio.wait_for(token_provider_from_env(env).token(), timeout)
        except (ReconcilerError, TimeoutError) as e:
            return d.AuthFacts(token_source, token_error=str(e) or "timed out")
        return d.AuthFacts(token_source)
    if settings.backend == REST and settings.credentials == "adc":
        from reconciler.adapters.auth import ApplicationDefaultCredentials

        try:  # the token is never kept, never shown
            await asyncio.wait_for(ApplicationDefaultCredentials().token(), timeout)
        except (ReconcilerError, TimeoutError) as e:
            return d.AuthFacts(d.ADC_SOURCE, token_error=str(e) or "timed out")
        return d.AuthFacts(d.ADC_SOURCE)
    if gcloud is None:
        return d.AuthFacts(None)
    listing = _run([gcloud, "auth", "list", "--format=json"], env, timeout)
    if settings.backend == REST:
        rc_out_err, token_error = await asyncio.gather(
            listing, _token_error(GcloudAccessToken(env, gcloud=gcloud, timeout=timeout))
        )
    else:
        rc_out_err, token_error = await listing, None
    rc, out, err = rc_out_err
    if rc != 0:
        said = gcloud_stderr.message(err, limit=300) or "no output"  # not its boilerplate
        return d.AuthFacts(None, accounts_error=said, token_error=token_error)
    try:
        accounts = json.loads(out or "[]")
    except ValueError:
        return d.AuthFacts(None, accounts_error="printed no JSON", token_error=token_error)
    if not isinstance(accounts, list):
        accounts = []
    return d.AuthFacts(None, accounts=accounts, token_error=token_error)


async def _token_error(provider: GcloudAccessToken) -> str | None:
    try:
        await provider.token()  # never kept, never shown
    except ReconcilerError as e:
        return str(e)
    return None


async def probe_api(desired: Desired, env: Mapping[str, str], timeout: float) -> d.ApiFacts:
    """One list call through the configured backend, as the controller makes it."""
    from reconciler.runtime.backends import make_tpu_cloud

    cloud = make_tpu_cloud(desired, env)
    transport = cloud.capability.transport
    try:
        zones = zones_to_observe(cloud, desired.zones)
        observation = await asyncio.wait_for(cloud.observe(zones), timeout)
    except TimeoutError:
        return d.ApiFacts(transport, error=f"no answer within {timeout:g}s")
    except ReconcilerError as e:
        return d.ApiFacts(transport, error=str(e))
    except Exception as e:  # doctor reports, never crashes
        return d.ApiFacts(transport, error=f"{type(e).__name__}: {e}")
    finally:
        with contextlib.suppress(Exception):
            await cloud.aclose()
    return d.ApiFacts(
        transport,
        queued_resources=len(observation.requests),
        unreachable=sorted(observation.unreachable),
        quota=cloud.quota_note(),
    )


async def probe_compute(desired: Desired, env: Mapping[str, str], timeout: float) -> ComputeFacts:
    """The Compute Engine cloud's own look (two aggregated lists)."""
    from reconciler.runtime.backends import make_compute_cloud

    cloud = make_compute_cloud(desired, env)
    try:
        observation = await asyncio.wait_for(cloud.observe(None), timeout)
    except TimeoutError:
        return ComputeFacts(error=f"no answer within {timeout:g}s")
    except ReconcilerError as e:
        return ComputeFacts(error=str(e))
    except Exception as e:  # doctor reports, never crashes
        return ComputeFacts(error=f"{type(e).__name__}: {e}")
    finally:
        with contextlib.suppress(Exception):
            await cloud.aclose()
    return ComputeFacts(len(observation.requests), sorted(observation.unreachable))


# --- local things ------------------------------------------------------------------------------


def probe_state_dir(root: Path) -> list[d.PathFacts] | None:
    """The state directory, its ``secrets/`` and each secret file; None when it is missing."""
    try:
        st = root.stat()
    except FileNotFoundError:
        return None
    found = [d.PathFacts(str(root), st.st_uid, stat.S_IMODE(st.st_mode), True)]
    secrets = root / "secrets"
    with contextlib.suppress(OSError):
        for p in [secrets, *sorted(secrets.iterdir())]:
            s = p.lstat()
            found.append(d.PathFacts(str(p), s.st_uid, stat.S_IMODE(s.st_mode), p.is_dir()))
    return found


def probe_snapshot(state: StateDir) -> tuple[StatusSnapshot | None, str | None]:
    try:
        snapshot = read_status(state.status)
    except StatusUnreadable as e:
        return None, str(e)
    if snapshot is None:
        return None, f"no status snapshot at {state.status}"
    return snapshot, None


async def probe_agent(env: Mapping[str, str], timeout: float) -> d.AgentFacts:
    sock = env.get("SSH_AUTH_SOCK")
    if not sock:
        return d.AgentFacts(None)
    ssh_add = shutil.which("ssh-add", path=env.get("PATH"))
    if ssh_add is None:
        return d.AgentFacts(sock, error="ssh-add not found (apt-get install openssh-client)")
    rc, out, err = await _run([ssh_add, "-l"], env, timeout)
    if rc == 1:
        return d.AgentFacts(sock, keys=0)
    if rc != 0:
        return d.AgentFacts(sock, error=f"cannot talk to the agent at {sock}: {_tail(err)}")
    return d.AgentFacts(sock, keys=sum(1 for line in out.splitlines() if line.strip()))


async def probe_oslogin(
    cache: Path, gcloud: str | None, env: Mapping[str, str], timeout: float
) -> d.UserFacts | None:
    from reconciler.adapters import oslogin

    cached = oslogin.read_cached(cache)
    if cached is not None:
        return d.UserFacts(cached, cached=True)
    if gcloud is None:
        return None
    try:  # lookup, not resolve_user: doctor writes no cache
        return d.UserFacts(await oslogin.lookup(gcloud=gcloud, env=env, timeout=timeout))
    except ReconcilerError as e:
        return d.UserFacts(None, error=str(e))


def _lab_checks(found: list[dl.OwnedFacts], controller_uid: int, lab: dl.LabFacts) -> list[d.Check]:
    files = dl.check_state_files(
        found, controller_uid=controller_uid, controller=user_name(controller_uid)
    )
    return [files, dl.check_lab(lab)]


def _failed(*checks: d.Check) -> str | None:
    return next((c.name for c in checks if c.status == "fail"), None)


async def _none() -> None:
    return None


async def _reach(
    ssh: Sequence[str] | None, desired: Desired | None, snapshot: StatusSnapshot | None,
    user: d.UserFacts | None, key_check: d.Check, user_check: d.Check, state: StateDir,
    env: Mapping[str, str], timeout: float,
) -> tuple[ds.ReachFacts | None, str | None]:  # fmt: skip
    """One login to a live worker, or why none was tried."""
    if not ssh or desired is None:
        return None, None
    settings = desired.settings
    blocked = _failed(key_check, user_check)
    login = settings.ssh_user or (user.user if user is not None else None)
    if blocked or login is None:
        return None, f"not tried: needs the key and the user (see {blocked or 'oslogin_user'})"
    node = live_node(snapshot, ssh)
    if isinstance(node, str):
        return None, node
    return await probe_reach(node, login, desired, snapshot, state, env, timeout), None


# --- all of it ---------------------------------------------------------------------------------


async def diagnose(
    desired_file: Path, state_root: Path, env: Mapping[str, str], *, now: float,
    timeout: float = 20.0,
) -> list[d.Check]:  # fmt: skip
    """Every check, in report order."""
    state = StateDir(state_root)
    desired, errors, raw = load_desired(desired_file, env, shared_file_owners(state))
    settings = (
        desired.settings
        if desired is not None
        else d.lenient_settings(_raw(raw, "settings"), env_overrides(env))
    )
    token_source = next((v for v in (TOKEN_ENV, TOKEN_FILE_ENV) if env.get(v)), None)
    path = env.get("PATH")
    gcloud = shutil.which("gcloud", path=path)
    needs_gcloud = d.gcloud_needed(settings, token_source)
    gcloud_check = d.check_gcloud(gcloud, needs_gcloud)
    gcloud_problem = gcloud_check.status == "fail"

    bootstrap = [s.name for s in desired.slots if s.setup.bootstrap] if desired else None
    tmux_slots = [s.name for s in desired.slots if s.setup.tmux] if desired else None
    user_needed = d.oslogin_needed(desired)
    auth, agent, user = await asyncio.gather(
        probe_auth(settings, token_source, gcloud, env, timeout)
        if not gcloud_problem or token_source
        else _none(),
        probe_agent(env, timeout) if bootstrap or ds.ssh_slots(desired) else _none(),
        probe_oslogin(state.oslogin_user, gcloud, env, timeout) if user_needed else _none(),
    )
    auth_check = d.check_auth(auth, gcloud_problem)

    api: d.ApiFacts | None = None
    compute: ComputeFacts | None = None
    blocked = None
    if desired is None:
        blocked = "desired.yaml is invalid (see desired)"
    elif auth_check.status in ("fail", "skip"):
        blocked = "no credentials (see auth)"
    else:
        api, compute = await asyncio.gather(
            probe_api(desired, env, timeout),
            probe_compute(desired, env, timeout) if compute_wanted(desired) else _none(),
        )

    quotas = None  # settings.quota_source: cloud (doctor_lab)
    if settings.quota_source == "cloud" and desired is not None and blocked is None:
        quotas = await probe_cloud_quotas(desired, env, timeout)

    pid = read_holder(state) if state_root.is_dir() else None
    snapshot, problem = probe_snapshot(state)
    ssh = ds.ssh_slots(desired)
    key = probe_key(settings, env) if ssh else None
    key_check = ds.check_ssh_key(ssh, key, agent)
    user_check = d.check_oslogin(user_needed, user, _failed(gcloud_check, auth_check))
    reach, not_tried = await _reach(ssh, desired, snapshot, user, key_check, user_check, state,
                                    env, timeout)  # fmt: skip
    proxies = probe_proxies(desired, ssh or (), env)
    poll = settings.poll_interval
    lab = probe_lab(state_root, desired_file)
    return [
        d.check_desired(str(desired_file), desired, errors),
        d.check_project(desired, _raw(raw, "project")),
        gcloud_check,
        auth_check,
        d.check_api(api, blocked),
        *([check_compute_api(compute, blocked)] if desired and compute_wanted(desired) else []),
        d.check_quota_project(api),
        *([dl.check_cloud_quotas(quotas, blocked)] if settings.quota_source == "cloud" else []),
        d.check_state_dir(str(state_root), probe_state_dir(state_root), os.getuid()),
        *(_lab_checks(*lab) if lab is not None else []),
        check_state_disk(str(state_root), disk_of(state_root)),
        d.check_controller(pid),
        d.check_snapshot(snapshot, problem, now, poll, pid is not None),
        d.check_tmux(tmux_slots, shutil.which("tmux", path=path)),
        d.check_ssh_agent(bootstrap, agent),
        key_check,
        user_check,
        *([ds.check_ssh_proxy(proxies)] if proxies else []),
        ds.check_ssh_reach(ssh, reach, not_tried),
        d.check_ntfy(settings.ntfy_topic),
    ]
