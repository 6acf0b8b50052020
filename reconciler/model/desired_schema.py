"""The schema of ``desired.yaml`` (v1) exactly as written: ``DesiredFile`` and its pydantic
models (``Settings``, ``Defaults``, ``SlotModel``, ``RaceGroupModel``, ``GeneratorModel``,
``QuotaModel``, ``MemberModel``, ``Setup``, ``WorkloadModel``), ``extra="forbid"`` everywhere so
a typo is an error, not a silently ignored key; and the defaults resolving fills in
(``DEFAULT_RUNTIME_VERSIONS``, ``DEFAULT_IMAGES``).

Every field has a ``description``: ``scripts/gen_reference.py`` walks these models into
docs/desired-reference.md. Their value types are ``model/desired_types.py``, the longer
descriptions ``model/desired_docs.py``, ``ssh_proxy`` and ``before_end`` their own modules
(``desired_proxy``, ``desired_ends``). ``model/load_resolve.py`` turns a ``DesiredFile`` into the
resolved ``Desired`` of ``model/desired.py``, which re-exports these names; this module imports
nothing of it.

Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from reconciler.model import accelerators
from reconciler.model import desired_docs as doc
from reconciler.model.desired_ends import BeforeEndModel
from reconciler.model.desired_proxy import SshProxyModel
from reconciler.model.desired_types import (
    Accelerator,
    Command,
    EnvName,
    EnvValue,
    Family,
    ImageName,
    MachineTypeName,
    MetricsSetting,
    Moment,
    NetworkName,
    Path,
    ProjectId,
    RegionName,
    RuntimeVersion,
    Seconds,
    SecretName,
    SlotName,
    SocketName,
    Topology,
    Url,
    UserName,
    ZoneCode,
    ZoneName,
)
from reconciler.model.vocabulary import DEFAULT_BACKEND, DEFAULT_MODE, Api, Backend, Mode, Want
from reconciler.model.workload import Restart, WhenDone

Across = Literal["slot", "group"]
CredentialSource = Literal["gcloud", "adc"]
QuotaSource = Literal["file", "cloud"]

#: Runtime versions used when neither the slot nor ``settings.runtime_versions`` names one
#: (TPU API slots; the catalogue's, ``model/accelerators.py``).
DEFAULT_RUNTIME_VERSIONS: Final[Mapping[str, str]] = {
    g.family: g.runtime_version for g in accelerators.CATALOGUE if g.runtime_version
}
#: Boot images used when neither the slot nor ``settings.images`` names one (Compute Engine
#: slots; TPU7x's is from third-party sources, not verified).
DEFAULT_IMAGES: Final[Mapping[str, str]] = {
    g.family: g.image for g in accelerators.CATALOGUE if g.image
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


#: Most slices one multislice queued resource may ask for.
MAX_SLICES: Final = 64


class Setup(_Model):
    """Setup flags; unset fields inherit from ``defaults.setup``."""

    bootstrap: bool | None = Field(None, description="Run setup scripts on every worker over SSH.")
    tailscale: bool | None = Field(None, description="Join the node to your tailnet.")
    tmux: bool | None = Field(None, description="Keep a tmux SSH window open to worker 0.")
    telemetry: bool | None = Field(
        None,
        description="Read the chips on every worker (duty cycle, HBM, holders): bootstrap "
        "installs the probe's client into a private venv there.",
    )
    generation: int = Field(
        0, ge=0, le=1_000_000, description="Bump to re-run setup on the same node."
    )
    scripts: list[Path] | None = Field(
        None, description="Setup scripts (relative to desired.yaml); else settings.setup_scripts."
    )
    at_boot: bool | None = Field(
        None,
        description="Put the setup scripts in the node's startup-script metadata: they run as "
        "root on every boot, without SSH (never the Tailscale key or secrets; see operations).",
    )


class WorkloadModel(_Model):
    """A program run on every worker; unset fields inherit (defaults < generator or race
    group < slot). A slot runs a workload when some layer gives it a ``command``."""

    command: Command | None = Field(
        None, description="A string run by `bash -lc` on each worker, or an argv list."
    )
    workdir: Path | None = Field(None, description="Working directory; else the login directory.")
    env: dict[EnvName, EnvValue] | None = Field(
        None, description="Environment variables (plain values only)."
    )
    secret_env: dict[EnvName, SecretName] | None = Field(
        None, description="ENV_NAME: secret name in the secret store (`secret set NAME`)."
    )
    restart: Restart = Field(
        "on-preemption",
        description="never, on-preemption (default), on-failure or always "
        "(preemptions never count as failures).",
    )
    max_failures: int = Field(
        3, ge=0, le=10_000, description="Relaunches after a failed attempt before giving up."
    )
    stall_after: Seconds | None = Field(
        None, description="No new output from any worker for this long = failed, e.g. 30m."
    )
    stop_grace: Seconds = Field(
        60.0,
        description="SIGTERM to every process of the attempt (its process group and all it "
        "started), then SIGKILL after this long.",
    )
    when_done: WhenDone = Field(
        "keep", description="keep, or release: release the TPU after success."
    )
    generation: int = Field(
        0, ge=0, le=1_000_000, description="Bump to restart it deliberately (a new run id)."
    )
    idle_after: Seconds | None = Field(
        None,
        description="Every chip of every worker under idle_below percent duty cycle this long "
        "while it runs = failed (a hang), e.g. 20m; needs setup.telemetry.",
    )
    idle_below: float = Field(
        1.0, gt=0, le=100, description="The duty cycle (percent) under which a chip is idle."
    )
    take_tpu: bool = Field(
        False,
        description="Before a launch, stop processes of others holding the chips (SIGTERM, "
        "stop_grace, SIGKILL) instead of waiting for them.",
    )
    keep_attempts: int = Field(
        5, ge=1, le=10_000, description="Attempt directories (output logs) kept on each worker."
    )
    across: Across | None = Field(
        None,
        description="On a race group only: group runs one program across every winner's "
        "workers (multislice over the network, MEGASCALE variables set); slot (default) runs "
        "one on each winner.",
    )
    before_end: BeforeEndModel | None = Field(
        None, description="A command run on every worker a lead before a known end."
    )


class Settings(_Model):
    backend: Backend = Field(
        DEFAULT_BACKEND, description="How to talk to Cloud TPU: rest (default, fast) or gcloud."
    )
    credentials: CredentialSource = Field(
        "gcloud",
        description="Where REST tokens come from: gcloud (config-helper, the default) or adc "
        "(Application Default Credentials: a service-account or authorized-user file, or the "
        "GCE metadata server); adc is used anyway when gcloud is not installed.",
    )
    quota_project: ProjectId | None = Field(
        None,
        description="Project charged for API quota (X-Goog-User-Project; --billing-project "
        "with gcloud); else gcloud's billing/quota_project, else the project.",
    )
    poll_interval: Seconds = Field(30.0, description="Seconds between polls when steady.")
    fast_poll_interval: Seconds = Field(
        5.0, description="Seconds between polls while anything is queued, moving or racing."
    )
    concurrency: int = Field(8, ge=1, le=64, description="Most cloud calls in flight at once.")
    network: NetworkName | None = Field(None, description="VPC network for new TPUs.")
    subnets: dict[ZoneName, NetworkName] = Field(
        default_factory=dict, description="Subnetwork per zone."
    )
    zone_codes: dict[ZoneName, ZoneCode] = Field(
        default_factory=dict, description="Short zone codes for generated names and tmux sessions."
    )
    allow_unknown_zones: bool = Field(
        False,
        description="Accept zones and regions missing from tpu-reconciler's list of Google "
        "Cloud zones (a zone newer than the list); off, one is an error with a did-you-mean.",
    )
    runtime_versions: dict[Family, RuntimeVersion] = Field(
        default_factory=dict,
        description="Runtime version per accelerator family, for slots on api: tpu.",
    )
    apis: dict[Family, Api] = Field(
        default_factory=dict,
        description="Which API holds each family's slots that do not say: tpu (the TPU API's "
        "queued resources) or compute (Compute Engine). Built in: compute for tpu7x, tpu for "
        "the rest.",
    )
    images: dict[Family, ImageName] = Field(
        default_factory=dict,
        description="Boot image per accelerator family, for slots on api: compute.",
    )
    reservations: dict[ZoneName, NetworkName] = Field(
        default_factory=dict,
        description="Compute Engine reservation per zone that mode: reserved slots on "
        "api: compute consume (a shared one as projects/OWNER/reservations/NAME).",
    )
    internal_ips: bool = Field(False, description="Create without external IPs; SSH internally.")
    prune: bool = Field(
        False, description="Delete QRs labelled managed-by=tpu-reconciler that are not in the file."
    )
    setup_scripts: list[Path] = Field(
        default_factory=list, description="Default bootstrap scripts, relative to desired.yaml."
    )
    ssh_user: UserName | None = Field(None, description="SSH user; else the OS Login user.")
    ssh_key: Path | None = Field(None, description="SSH private key; else google_compute_engine.")
    ssh_port: int = Field(22, ge=1, le=65535, description="SSH port on the TPU VMs.")
    ssh_concurrency: int = Field(32, ge=1, le=512, description="Most SSH sessions at once.")
    ssh_proxy: SshProxyModel | None = Field(None, description=doc.PROXY["settings"])
    tmux_socket: SocketName | None = Field(None, description="tmux server socket name (-L).")
    ntfy_topic: str = Field("", description="ntfy topic for notices; empty disables them.")
    ntfy_server: Url = Field("https://ntfy.sh", description="ntfy server URL.")
    suspend: bool = Field(False, description="Observe, plan and report, but take no action at all.")
    delete_guard: int = Field(
        2,
        ge=0,
        le=100_000,
        description="Most ACTIVE TPUs one change may delete before `tpu-reconciler confirm`.",
    )
    history_retention: Seconds = Field(
        365 * 86400.0, description="How long the capacity history keeps records, e.g. 90d."
    )
    quota_source: QuotaSource = Field(
        "file",
        description="Where chip limits come from: file (the quotas: entries, the default) or "
        "cloud (also the Cloud Quotas API's limits for Cloud TPU, read with the project's "
        "credentials; CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS points it elsewhere).",
    )
    metrics: MetricsSetting | None = Field(
        None,
        description="Serve Prometheus metrics at /metrics here: a port (9464, on 127.0.0.1) or "
        "IP:PORT; another machine may scrape only an address written as a non-loopback IP "
        "(0.0.0.0:9464). Off when absent.",
    )


class Defaults(_Model):
    mode: Mode = Field(DEFAULT_MODE, description="Mode for slots that do not say.")
    setup: Setup = Field(
        default_factory=lambda: Setup(bootstrap=False, tailscale=False, tmux=True),
        description="Setup flags for slots that do not say.",
    )
    workload: WorkloadModel | None = Field(
        None, description="Workload fields every slot inherits (a command here runs everywhere)."
    )


class SlotModel(_Model):
    name: SlotName = Field(description="Slot name = queued resource id = node id.")
    zone: ZoneName = Field(description="Zone to queue in.")
    accelerator: Accelerator | None = Field(
        None,
        description=doc.SLOT["accelerator"],
    )
    machine_type: MachineTypeName | None = Field(None, description=doc.SLOT["machine_type"])
    topology: Topology | None = Field(None, description=doc.SLOT["topology"])
    api: Api | None = Field(None, description=doc.SLOT["api"])
    mode: Mode | None = Field(
        None, description="spot, on-demand, reserved or flex-start; else defaults.mode."
    )
    runtime_version: RuntimeVersion | None = Field(None, description=doc.SLOT["runtime_version"])
    image: ImageName | None = Field(None, description=doc.SLOT["image"])
    valid_until: Seconds | None = Field(None, description="Queueing window, e.g. 6h.")
    want: Want | None = Field(None, description="held or released; omit inside race groups.")
    setup: Setup | None = Field(
        None, description="Setup flags for this slot, each overriding defaults.setup."
    )
    start_at: Moment | None = Field(None, description=doc.HOLD["start_at"])
    start_after: Seconds | None = Field(None, description=doc.HOLD["start_after"])
    hold_for: Seconds | None = Field(None, description=doc.HOLD["hold_for"])
    hold_until: Moment | None = Field(None, description=doc.HOLD["hold_until"])
    paused: bool = Field(False, description=doc.HOLD["paused"])
    workload: WorkloadModel | None = Field(
        None, description="The program to run on every worker; see workload."
    )
    owner: UserName | None = Field(None, description=doc.OWNER)
    max_run_duration: Seconds | None = Field(None, description=doc.FLEX["max_run_duration"])
    renew: bool | None = Field(None, description=doc.FLEX["renew"])
    slices: int = Field(1, ge=1, le=MAX_SLICES, description=doc.SLICES)
    ssh_proxy: SshProxyModel | None = Field(None, description=doc.PROXY["slot"])


class RaceGroupModel(_Model):
    name: SlotName = Field(description="Race group name.")
    count: int = Field(1, ge=0, le=1000, description="Winners wanted; 0 releases every candidate.")
    slots: list[SlotName] = Field(
        min_length=1, description="Candidate slot names (defined in slots or generated)."
    )
    start_at: Moment | None = Field(None, description=doc.HOLD["start_at"])
    start_after: Seconds | None = Field(None, description=doc.HOLD["start_after"])
    hold_for: Seconds | None = Field(None, description=doc.HOLD["hold_for"])
    hold_until: Moment | None = Field(None, description=doc.HOLD["hold_until"])
    paused: bool = Field(False, description=doc.HOLD["paused"])
    workload: WorkloadModel | None = Field(
        None, description="Run on whichever candidate wins; see workload."
    )
    owner: UserName | None = Field(
        None, description="Unix user who holds it; its candidates' owner unless they name one."
    )
    min_count: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="With workload.across: group, run the program once this many winners are "
        "set up (at most count) while the rest is raced; else all count.",
    )


class GeneratorModel(_Model):
    mode: Mode | None = Field(None, description="Mode of the generated slots; else defaults.mode.")
    zones: list[ZoneName] = Field(min_length=1, description="Zones to generate slots in.")
    accelerators: dict[Accelerator, Annotated[int, Field(ge=1, le=256)]] = Field(
        min_length=1, description="How many slots of each type per zone."
    )
    want: Want | None = Field(
        None, description="held or released for generated slots not in a race group."
    )
    api: Api | None = Field(None, description="As on slots.")
    runtime_version: RuntimeVersion | None = Field(None, description="As on slots.")
    image: ImageName | None = Field(None, description="As on slots.")
    valid_until: Seconds | None = Field(None, description="As on slots.")
    setup: Setup | None = Field(None, description="As on slots.")
    start_at: Moment | None = Field(None, description=doc.HOLD["start_at"])
    start_after: Seconds | None = Field(None, description=doc.HOLD["start_after"])
    hold_for: Seconds | None = Field(None, description=doc.HOLD["hold_for"])
    hold_until: Moment | None = Field(None, description=doc.HOLD["hold_until"])
    paused: bool = Field(False, description=doc.HOLD["paused"])
    workload: WorkloadModel | None = Field(None, description="As on slots.")
    owner: UserName | None = Field(None, description="As on slots; its slots' owner.")
    max_run_duration: Seconds | None = Field(None, description=doc.FLEX["max_run_duration"])
    renew: bool | None = Field(None, description=doc.FLEX["renew"])
    slices: int = Field(1, ge=1, le=MAX_SLICES, description="As on slots.")
    ssh_proxy: SshProxyModel | None = Field(None, description="As on slots.")


class QuotaModel(_Model):
    """A chip limit the cloud enforces (TRC grant, spot quota): one family, mode and place."""

    family: Family = Field(description="Accelerator family: v4, v5litepod, v5p, v6e, tpu7x.")
    mode: Mode = Field(description="spot, on-demand or reserved.")
    api: Api | None = Field(
        None,
        description="The API whose quota it is (each has its own); else the family's "
        "(settings.apis, else compute for tpu7x and tpu for the rest).",
    )
    zone: ZoneName | None = Field(None, description="The zone it applies to (or region).")
    region: RegionName | None = Field(
        None, description="The region it applies to, every zone in it (or zone)."
    )
    chips: int = Field(ge=0, le=1_000_000, description="Most chips held or queued at once.")


class MemberModel(_Model):
    """One person of a lab sharing the project: a cap per accelerator family and a priority."""

    chips: dict[Family, Annotated[int, Field(ge=0, le=1_000_000)]] = Field(
        default_factory=dict,
        description="Most chips of each family this member's slots may hold or queue at once.",
    )
    priority: int = Field(
        0,
        ge=-1000,
        le=1000,
        description="Higher goes first when creates compete for a quota (then fewest chips "
        "held, then file order).",
    )


class DesiredFile(_Model):
    project: ProjectId = Field(description="GCP project that owns the TPUs (required).")
    settings: Settings = Field(
        default_factory=Settings, description="How the controller works; see settings."
    )
    defaults: Defaults = Field(
        default_factory=Defaults, description="Defaults for slots and generators; see defaults."
    )
    slots: list[SlotModel] = Field(
        default_factory=list,
        description="TPUs you may want, each a queued resource and node of that name.",
    )
    race_groups: list[RaceGroupModel] = Field(
        default_factory=list, description="Candidate slots raced until `count` of them win."
    )
    generate: list[GeneratorModel] = Field(
        default_factory=list,
        description="Zones x accelerator counts that expand into named slots.",
    )
    quotas: list[QuotaModel] = Field(
        default_factory=list,
        description="Chip limits per family, mode and zone or region: creates past one wait.",
    )
    members: dict[UserName, MemberModel] = Field(
        default_factory=dict,
        description="Per owner (a slot's owner:): chip caps per family and a priority.",
    )
