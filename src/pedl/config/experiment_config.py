"""Experiment configs, with Determined's key names. Unknown keys are errors; every problem is listed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, Tag, field_validator, model_validator

from pedl.config.byte_sizes import ShmSize
from pedl.config.checkpoint_storage import S3Location, absolute_host_path, storage_discriminator
from pedl.config.hyperparameters import DoubleHP, IntHP, LogHP, iter_hparams, parse_hyperparameters
from pedl.config.loading import (
    ConfigError,
    FieldProblems,
    StrictModel,
    parse_yaml_text,
    validate_data,
)
from pedl.config.metrics_retention import ExperimentMetricsRetention
from pedl.config.storable_values import INT64_MAX, FiniteFloat, value_problems
from pedl.config.task_container import (
    BindMount,
    DeviceEnvironment,
    DeviceImages,
    RegistryAuth,
    check_env_list,
    env_pairs,
    image_name,
    master_only_problems,
)
from pedl.config.trial_api import CheckpointPolicy, OptimizationsConfig, epoch_length_problems

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig

# Bounds that keep every value storable in a 64-bit column and a JSON document on both databases,
# and the work a config asks for small (a length's units, ASHA's rungs).
MAX_NAME_LENGTH = 255
MAX_SLOTS_PER_TRIAL = 10_000
MAX_RESTARTS = 1_000
MAX_LENGTH_UNITS = 10**12
MAX_SEED = 2**31 - 1  # trial seeds are derived from it modulo 2**31
Name = Annotated[str, Field(max_length=MAX_NAME_LENGTH)]
M = TypeVar("M", bound=StrictModel)


class Length(StrictModel):
    """A training length in Determined's units; `max_length: 100` means 100 batches."""

    batches: int | None = Field(default=None, ge=1, le=MAX_LENGTH_UNITS)
    epochs: int | None = Field(default=None, ge=1, le=MAX_LENGTH_UNITS)
    records: int | None = Field(default=None, ge=1, le=MAX_LENGTH_UNITS)

    @model_validator(mode="after")
    def _one(self) -> Length:
        set_ = [k for k in ("batches", "epochs", "records") if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError("give exactly one of batches, epochs, records")
        return self

    @property
    def unit(self) -> str:
        return next(k for k in ("batches", "epochs", "records") if getattr(self, k) is not None)

    @property
    def units(self) -> int:
        return int(getattr(self, self.unit))


def _coerce_length(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("a length is an integer or {batches: N}")
    if isinstance(v, int):
        return {"batches": v}
    return v


_ASHA_ONLY = ("divisor", "max_rungs", "mode", "time_metric", "max_time")


class SearcherConfig(StrictModel):
    name: Literal["single", "grid", "random", "adaptive_asha"]
    metric: str = Field(
        ..., min_length=1, max_length=MAX_NAME_LENGTH, description="validation metric the searcher optimizes"
    )
    smaller_is_better: bool = True
    max_trials: int | None = Field(default=None, ge=1, description="trials to sample (random, adaptive_asha)")
    max_length: Length | None = None
    max_concurrent_trials: int = Field(
        default=0, ge=0, le=INT64_MAX, description="0 means no limit (adaptive_asha: Determined's per-bracket default)"
    )
    # at least 1.01: rungs are counted by repeated multiplication, about log(max_length)/log(divisor) steps
    divisor: FiniteFloat = Field(
        default=4, ge=1.01, le=1_000_000, description="adaptive_asha: keep the top 1/divisor at each rung"
    )
    max_rungs: int = Field(default=5, ge=1, le=100, description="adaptive_asha: rungs of the most aggressive bracket")
    mode: Literal["aggressive", "standard", "conservative"] = Field(
        default="standard", description="adaptive_asha: which brackets run (aggressive: one, conservative: all)"
    )
    # Determined 0.38's replacement of max_length: rungs measured by a metric of the validation reports
    time_metric: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description=(
            "adaptive_asha: the validation metric that measures a trial's training (e.g. batches); with max_time"
        ),
    )
    max_time: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LENGTH_UNITS,
        description=("adaptive_asha: the time_metric value a trial that is never stopped trains to; with time_metric"),
    )
    source_trial_id: int | None = Field(default=None, ge=0, le=INT64_MAX)
    source_checkpoint_uuid: str | None = Field(default=None, max_length=64)

    _coerce = field_validator("max_length", mode="before")(_coerce_length)

    @property
    def trial_length(self) -> int:
        """What a trial trains to in batches-or-max_length's units (its target): max_length, or
        max_time when the time metric is batches; 0 when the trial decides (another time metric)."""
        if self.max_length is not None:
            return self.max_length.units
        return self.max_time if self.time_metric == "batches" and self.max_time else 0

    @model_validator(mode="after")
    def _needs(self) -> SearcherConfig:
        if self.name == "random" and self.max_trials is None:
            raise ValueError("max_trials is required for the random searcher")
        problems: list[tuple[str, str]] = []
        if (self.time_metric is None) != (self.max_time is None):
            missing = "max_time" if self.max_time is None else "time_metric"
            problems.append((f"searcher.{missing}", "time_metric and max_time are given together"))
        if self.name == "adaptive_asha":
            problems += [
                (f"searcher.{key}", "required for the adaptive_asha searcher")
                for key in ("max_trials",)
                if getattr(self, key) is None
            ]
            if self.max_length is None and self.time_metric is None and self.max_time is None:
                problems.append(
                    (
                        "searcher.max_length",
                        "the adaptive_asha searcher needs time_metric and max_time (or the deprecated max_length)",
                    )
                )
        else:
            # compared with the defaults, not model_fields_set: stored configs are full dumps
            problems += [
                (f"searcher.{key}", "only for the adaptive_asha searcher")
                for key in _ASHA_ONLY
                if getattr(self, key) != type(self).model_fields[key].default
            ]
        if problems:
            raise FieldProblems(problems)
        return self


class ResourcesConfig(StrictModel):
    slots_per_trial: int = Field(default=1, ge=0, le=MAX_SLOTS_PER_TRIAL)
    resource_pool: Name | None = None
    priority: int | None = Field(default=None, ge=1, le=99, description="1 is most urgent")
    weight: FiniteFloat = Field(default=1.0, gt=0, le=1_000_000)
    max_slots: int | None = Field(default=None, ge=0, le=1_000_000)
    movable: bool = Field(
        default=True, description="false: consolidation never moves this experiment's trials to another instance"
    )
    shm_size: ShmSize = Field(
        default=None,
        description="/dev/shm of each trial: bytes, or '512m', '1.5g' (powers of "
        "1024); left out: task_container_defaults.shm_size_bytes in a "
        "container, the host's /dev/shm for a process",
    )


class StorageRetention(StrictModel):
    """Which checkpoints every storage type keeps; left out: the master's checkpoint_storage says."""

    save_experiment_best: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="best checkpoints of the experiment kept"
    )
    save_trial_best: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="best checkpoints of each trial kept"
    )
    save_trial_latest: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="latest checkpoints of each trial kept"
    )


class SharedFSStorageConfig(StorageRetention):
    """shared_fs storage, or (without `type`) the master's storage with some fields changed: what is
    left out here comes from the master's checkpoint_storage."""

    type: Literal["shared_fs"] | None = Field(default=None, description="left out: the master's storage type")
    host_path: str | None = Field(default=None, description="an absolute directory on the master and the agents")
    storage_path: str | None = None

    _absolute = field_validator("host_path")(lambda cls, v: absolute_host_path(v))


class S3StorageConfig(S3Location, StorageRetention):
    pass


class DirectoryStorageConfig(StorageRetention):
    """Determined's `directory` storage: checkpoints at a path as the experiment's tasks see it (in a
    container, usually a bind mount's container_path)."""

    type: Literal["directory"]
    container_path: str = Field(..., min_length=1, max_length=4096, description="absolute path in the task")
    host_path: str | None = Field(
        default=None,
        max_length=4096,
        description="where the master finds the same files; left out: worked out from the bind mounts",
    )

    @field_validator("container_path", "host_path")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or "\x00" in v):
            raise ValueError("must be an absolute path")
        return v


CheckpointStorageConfig = Annotated[
    Annotated[SharedFSStorageConfig, Tag("shared_fs")]
    | Annotated[S3StorageConfig, Tag("s3")]
    | Annotated[DirectoryStorageConfig, Tag("directory")],
    storage_discriminator("shared_fs", "s3", "directory"),
]


class EnvironmentConfig(StrictModel):
    image: str | DeviceImages | None = Field(
        default=None, description="Docker image the task runs in (or {cpu, gpu}); none: a process on the agent"
    )
    force_pull_image: bool | None = Field(default=None, description="pull the image even when the agent has it")
    registry_auth: RegistryAuth | None = None
    environment_variables: list[str] | dict[str, str] | DeviceEnvironment = Field(default_factory=list)
    # Determined's Kubernetes pod spec: kept with the config (a TensorBoard inherits it, as Determined's
    # does) and not used, since pedl's agents run processes and Docker containers, not pods
    pod_spec: dict[str, Any] | None = Field(default=None, description="accepted, unused (Kubernetes only)")

    _env = field_validator("environment_variables", mode="after")(lambda cls, v: check_env_list(v))
    _image = field_validator("image")(lambda cls, v: image_name(v) if isinstance(v, str) else v)

    def as_dict(self) -> dict[str, str]:
        """The variables every device type gets ({cpu, gpu} forms: see device_variables)."""
        if isinstance(self.environment_variables, DeviceEnvironment):
            return {}
        return env_pairs(self.environment_variables)


class ReproducibilityConfig(StrictModel):
    experiment_seed: int | None = Field(default=None, ge=0, le=MAX_SEED)


class ExperimentConfig(StrictModel):
    name: Name = ""
    description: str = ""
    labels: list[Name] = Field(default_factory=list)
    entrypoint: str | list[str] = Field(..., description="command run in the model directory")
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    searcher: SearcherConfig
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    max_restarts: int = Field(default=5, ge=0, le=MAX_RESTARTS)
    checkpoint_storage: CheckpointStorageConfig | None = None
    min_validation_period: Length | None = None
    min_checkpoint_period: Length | None = None
    records_per_epoch: int = Field(default=0, ge=0, le=MAX_LENGTH_UNITS)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    reproducibility: ReproducibilityConfig = Field(default_factory=ReproducibilityConfig)
    data: dict[str, Any] = Field(default_factory=dict, description="free-form, passed to the trial")
    workspace: Name | None = None
    project: Name | None = None
    bind_mounts: list[BindMount] = Field(default_factory=list, description="host directories the task sees")
    metrics_retention: ExperimentMetricsRetention | None = Field(
        default=None,
        description="pedl's: thin this experiment's old training reports (instead of the master's setting)",
    )
    # Determined keys pedl accepts and does not use: scheduling_unit (batches per legacy workload;
    # the Core API has none) and profiling (Determined's profiler, removed in 0.38)
    # Determined's Trial APIs read these (pedl.config.trial_api): batches between training reports, when
    # to checkpoint after a validation, a validation before the first batch, Determined's profiler
    scheduling_unit: int | None = Field(
        default=None, ge=1, le=MAX_LENGTH_UNITS, description="Trial APIs: batches per report"
    )
    optimizations: OptimizationsConfig = Field(default_factory=OptimizationsConfig)
    checkpoint_policy: CheckpointPolicy = Field(
        default="best", description="Trial APIs: checkpoint after which validations"
    )
    perform_initial_validation: bool = False
    debug: bool = Field(default=False, description="the harness's debug logs")
    profiling: dict[str, Any] | None = Field(default=None, description="Trial APIs: Determined's profiler settings")

    _coerce_min_val = field_validator("min_validation_period", "min_checkpoint_period", mode="before")(_coerce_length)

    @field_validator("entrypoint", mode="before")
    @classmethod
    def _entrypoint_type(cls, v: Any) -> Any:
        # one clear message instead of one per member of the str | list[str] union
        if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            return v
        raise ValueError("must be a command string or a list of strings")

    @field_validator("entrypoint", mode="after")
    @classmethod
    def _entrypoint(cls, v: str | list[str]) -> str | list[str]:
        if (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise ValueError("must not be empty")
        return v

    @field_validator("hyperparameters", mode="after")
    @classmethod
    def _hparams(cls, v: dict[str, Any]) -> dict[str, Any]:
        return parse_hyperparameters(v)

    @model_validator(mode="after")
    def _epochs(self) -> ExperimentConfig:
        problems = epoch_length_problems(self)
        if problems:
            raise FieldProblems(problems)
        return self

    @model_validator(mode="after")
    def _grid(self) -> ExperimentConfig:
        if self.searcher.name == "grid":
            missing = [
                (f"hyperparameters.{path}.count", "required for the grid searcher")
                for path, hp in iter_hparams(self.hyperparameters)
                if isinstance(hp, IntHP | DoubleHP | LogHP) and hp.count is None
            ]
            if missing:
                raise FieldProblems(missing)
        return self

    def entrypoint_argv(self) -> list[str] | str:
        return self.entrypoint


def parse_experiment_config(
    text_or_data: str | dict[str, Any], source: str = "experiment config", *, limits: LimitsConfig | None = None
) -> ExperimentConfig:
    """Parse and validate within `limits` (the master's; the defaults where None). Every value is
    checked before the models see it, so a NUL character or an infinite number anywhere (`data`,
    hyperparameter values, environment variables) is refused naming its path, the same on SQLite
    and PostgreSQL."""
    data = parse_yaml_text(text_or_data, source, limits=limits) if isinstance(text_or_data, str) else text_or_data
    return validate_checked(ExperimentConfig, data, source, limits)


def validate_checked(model: type[M], data: Any, source: str, limits: LimitsConfig | None) -> M:
    """`data` as `model`, every value checked first (value_problems), each problem listed once with
    its field; an `environment` may not set MASTER_ONLY_VARIABLES (master_only_problems)."""
    max_string = limits.max_string_length if limits is not None else None
    if max_string is None:
        from pedl.config.security_config import LimitsConfig  # imports config.loading: load on use

        max_string = LimitsConfig().max_string_length
    fields = [{"field": f, "message": m} for f, m in value_problems(data, max_string_length=max_string)]
    if any("surrogate" in p["message"] for p in fields):
        # pydantic cannot even word its own errors about such text: refuse before it sees it
        lines = "; ".join(f"{p['field']}: {p['message']}" for p in fields)
        raise ConfigError(f"invalid {source}: {lines}", fields=fields)
    try:
        config = validate_data(model, data, source)
    except ConfigError as exc:  # listed with the value problems, once per field
        named = {p["field"] for p in fields}
        fields += [p for p in exc.fields if p["field"] not in named]
        if not fields:
            raise
        config = None
    else:  # what a submission may not set, though a stored config that has it still loads
        environment = getattr(config, "environment", None)
        if isinstance(environment, EnvironmentConfig):
            fields += [
                {"field": f"environment.{f}", "message": m}
                for f, m in master_only_problems(environment.environment_variables)
            ]
    if fields or config is None:
        lines = "; ".join(f"{p['field']}: {p['message']}" for p in fields)
        raise ConfigError(f"invalid {source}: {lines}", fields=fields)
    return config
