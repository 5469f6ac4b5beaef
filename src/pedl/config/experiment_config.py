"""Experiment configs, with Determined's key names. Unknown keys are errors; every problem is listed."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from pedl.config.checkpoint_storage import S3Location, storage_union
from pedl.config.loading import FieldProblems, StrictModel, parse_yaml_text, validate_data


class ConstHP(StrictModel):
    type: Literal["const"]
    val: Any


class IntHP(StrictModel):
    type: Literal["int"]
    minval: int
    maxval: int
    count: int | None = Field(None, ge=1, description="grid points")

    @model_validator(mode="after")
    def _range(self) -> IntHP:
        if self.minval > self.maxval:
            raise ValueError("minval must be <= maxval")
        return self


class DoubleHP(StrictModel):
    type: Literal["double"]
    minval: float
    maxval: float
    count: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _range(self) -> DoubleHP:
        if self.minval > self.maxval:
            raise ValueError("minval must be <= maxval")
        return self


class LogHP(StrictModel):
    type: Literal["log"]
    minval: float
    maxval: float
    base: float = Field(10.0, gt=0)
    count: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _range(self) -> LogHP:
        if self.minval > self.maxval:
            raise ValueError("minval must be <= maxval")
        if self.base == 1:
            raise ValueError("base must not be 1")
        return self


class CategoricalHP(StrictModel):
    type: Literal["categorical"]
    vals: list[Any] = Field(..., min_length=1)


Hyperparameter = Annotated[ConstHP | IntHP | DoubleHP | LogHP | CategoricalHP, Field(discriminator="type")]
_HP_ADAPTER: TypeAdapter[Any] = TypeAdapter(Hyperparameter)


class Length(StrictModel):
    """A training length in Determined's units; `max_length: 100` means 100 batches."""

    batches: int | None = Field(None, ge=1)
    epochs: int | None = Field(None, ge=1)
    records: int | None = Field(None, ge=1)

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


_ASHA_ONLY = ("divisor", "max_rungs", "mode")


class SearcherConfig(StrictModel):
    name: Literal["single", "grid", "random", "adaptive_asha"]
    metric: str = Field(..., min_length=1, description="validation metric the searcher optimizes")
    smaller_is_better: bool = True
    max_trials: int | None = Field(None, ge=1, description="trials to sample (random, adaptive_asha)")
    max_length: Length | None = None
    max_concurrent_trials: int = Field(
        0, ge=0, description="0 means no limit (adaptive_asha: Determined's per-bracket default)")
    divisor: float = Field(4, gt=1, description="adaptive_asha: keep the top 1/divisor at each rung")
    max_rungs: int = Field(5, ge=1, description="adaptive_asha: rungs of the most aggressive bracket")
    mode: Literal["aggressive", "standard", "conservative"] = Field(
        "standard", description="adaptive_asha: which brackets run (aggressive: one, conservative: all)")
    source_trial_id: int | None = None
    source_checkpoint_uuid: str | None = None

    _coerce = field_validator("max_length", mode="before")(_coerce_length)

    @model_validator(mode="after")
    def _needs(self) -> SearcherConfig:
        if self.name == "random" and self.max_trials is None:
            raise ValueError("max_trials is required for the random searcher")
        problems: list[tuple[str, str]] = []
        if self.name == "adaptive_asha":
            problems += [(f"searcher.{key}", "required for the adaptive_asha searcher")
                         for key in ("max_trials", "max_length") if getattr(self, key) is None]
        else:
            # compared with the defaults, not model_fields_set: stored configs are full dumps
            problems += [(f"searcher.{key}", "only for the adaptive_asha searcher") for key in _ASHA_ONLY
                         if getattr(self, key) != type(self).model_fields[key].default]
        if problems:
            raise FieldProblems(problems)
        return self


class ResourcesConfig(StrictModel):
    slots_per_trial: int = Field(1, ge=0)
    resource_pool: str | None = None
    priority: int | None = Field(None, ge=1, le=99, description="1 is most urgent")
    weight: float = Field(1.0, gt=0)
    max_slots: int | None = Field(None, ge=0)


class SharedFSStorageConfig(StrictModel):
    """shared_fs storage, or (without `type`) the master's storage with some fields changed: what is
    left out here comes from the master's checkpoint_storage."""

    type: Literal["shared_fs"] | None = Field(None, description="left out: the master's storage type")
    host_path: str | None = None
    storage_path: str | None = None
    save_experiment_best: int | None = Field(None, ge=0, description="best checkpoints of the experiment kept")
    save_trial_best: int | None = Field(None, ge=0, description="best checkpoints of each trial kept")
    save_trial_latest: int | None = Field(None, ge=0, description="latest checkpoints of each trial kept")


class S3StorageConfig(S3Location):
    save_experiment_best: int | None = Field(None, ge=0, description="best checkpoints of the experiment kept")
    save_trial_best: int | None = Field(None, ge=0, description="best checkpoints of each trial kept")
    save_trial_latest: int | None = Field(None, ge=0, description="latest checkpoints of each trial kept")


CheckpointStorageConfig = storage_union(SharedFSStorageConfig, S3StorageConfig)


class EnvironmentConfig(StrictModel):
    environment_variables: list[str] | dict[str, str] = Field(default_factory=list)

    @field_validator("environment_variables", mode="after")
    @classmethod
    def _pairs(cls, v: list[str] | dict[str, str]) -> list[str] | dict[str, str]:
        if isinstance(v, list):
            for item in v:
                if "=" not in item:
                    raise ValueError(f"{item!r} is not NAME=VALUE")
        return v

    def as_dict(self) -> dict[str, str]:
        if isinstance(self.environment_variables, dict):
            return dict(self.environment_variables)
        return dict(item.split("=", 1) for item in self.environment_variables)


class ReproducibilityConfig(StrictModel):
    experiment_seed: int | None = Field(None, ge=0)


class ExperimentConfig(StrictModel):
    name: str = Field("", max_length=512)
    description: str = ""
    labels: list[str] = Field(default_factory=list)
    entrypoint: str | list[str] = Field(..., description="command run in the model directory")
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    searcher: SearcherConfig
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    max_restarts: int = Field(5, ge=0)
    checkpoint_storage: CheckpointStorageConfig | None = None
    min_validation_period: Length | None = None
    min_checkpoint_period: Length | None = None
    records_per_epoch: int = Field(0, ge=0)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    reproducibility: ReproducibilityConfig = Field(default_factory=ReproducibilityConfig)
    data: dict[str, Any] = Field(default_factory=dict, description="free-form, passed to the trial")
    workspace: str | None = None
    project: str | None = None

    _coerce_min_val = field_validator("min_validation_period", "min_checkpoint_period",
                                      mode="before")(_coerce_length)

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
        problems: list[tuple[str, str]] = []
        out = {key: _parse_hparam(val, f"hyperparameters.{key}", problems) for key, val in v.items()}
        if problems:
            raise FieldProblems(problems)
        return out

    @model_validator(mode="after")
    def _grid(self) -> ExperimentConfig:
        if self.searcher.name == "grid":
            missing = [(f"hyperparameters.{path}.count", "required for the grid searcher")
                       for path, hp in iter_hparams(self.hyperparameters)
                       if isinstance(hp, IntHP | DoubleHP | LogHP) and hp.count is None]
            if missing:
                raise FieldProblems(missing)
        return self

    def entrypoint_argv(self) -> list[str] | str:
        return self.entrypoint


def _parse_hparam(value: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    """Parse one hyperparameter (or nested group); problems are appended as (path, message)."""
    if isinstance(value, dict) and "type" in value:
        try:
            return _HP_ADAPTER.validate_python(value)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                # drop the union tag pydantic puts first in the location
                loc = [str(p) for p in err["loc"][1:]] if len(err["loc"]) > 1 else []
                where = ".".join([path, *loc])
                msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
                problems.append((where, msg))
            return None
    if isinstance(value, dict):  # a nested group
        return {k: _parse_hparam(v, f"{path}.{k}", problems) for k, v in value.items()}
    return ConstHP(type="const", val=value)


def iter_hparams(tree: dict[str, Any], prefix: str = ""):
    """Yield (dotted path, hyperparameter) for every leaf of a (possibly nested) hparam tree."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from iter_hparams(value, path + ".")
        else:
            yield path, value


def parse_experiment_config(text_or_data: str | dict[str, Any], source: str = "experiment config") -> ExperimentConfig:
    data = parse_yaml_text(text_or_data, source) if isinstance(text_or_data, str) else text_or_data
    return validate_data(ExperimentConfig, data, source)
