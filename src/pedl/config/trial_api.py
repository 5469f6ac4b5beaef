"""What Determined's Trial APIs (PyTorchTrial, DeepSpeedTrial, TFKerasTrial) need of an experiment config.

- The legacy entrypoint: `entrypoint: model_def:MyTrial` names a Trial class, which Determined 0.38.1
  runs through `determined.launch.torch_distributed --trial` (determined/exec/launch.py).
- The keys only those APIs read (`optimizations`, `checkpoint_policy`, `perform_initial_validation`).
- The config as Determined's master hands it to a trial (`info.trial._config`): its harness indexes
  many keys directly, so every default Determined's master fills is filled here too.

Pure: no I/O.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Literal, TypeGuard

from pydantic import Field

from pedl.config.loading import StrictModel

# determined.util.match_legacy_trial_class: `module.submodule:ClassName`
LEGACY_ENTRYPOINT = re.compile(r"^[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+$")

# the exit status of a legacy entrypoint whose Trial class cannot be loaded at all (no determined package,
# no such module or class, not a Trial): every restart would fail the same way, so the trial ends at once.
# sysexits' EX_CONFIG.
UNLOADABLE_TRIAL_EXIT = 78


def is_legacy_entrypoint(entrypoint: Any) -> TypeGuard[str]:
    return isinstance(entrypoint, str) and LEGACY_ENTRYPOINT.match(entrypoint) is not None


class OptimizationsConfig(StrictModel):
    """Determined's `optimizations`: read by PyTorchTrial's harness (aggregation_frequency, gradient
    compression and averaging) and Horovod; the rest are accepted as Determined accepts them."""

    aggregation_frequency: int = Field(default=1, ge=1, le=1_000_000, description="batches per optimizer step")
    average_aggregated_gradients: bool = True
    average_training_metrics: bool = True
    gradient_compression: bool = False
    grad_updates_size_file: str | None = Field(default=None, max_length=4096)
    mixed_precision: Literal["O0", "O1", "O2", "O3"] = "O0"
    tensor_fusion_threshold: int = Field(default=64, ge=1, le=1_000_000)
    tensor_fusion_cycle_time: int = Field(default=1, ge=1, le=1_000_000)
    auto_tune_tensor_fusion: bool = False


CheckpointPolicy = Literal["best", "all", "none"]

# Determined 0.38.1's defaults (schemas/expconf/v0), for the keys a trial's harness reads
_TOP_DEFAULTS: dict[str, Any] = {
    "bind_mounts": [],
    "checkpoint_policy": "best",
    "data": {},
    "debug": False,
    "description": None,
    "environment": {},
    "hyperparameters": {},
    "labels": [],
    "log_policies": [],
    "max_restarts": 5,
    "min_checkpoint_period": {"batches": 0},
    "min_validation_period": {"batches": 0},
    "name": None,
    "perform_initial_validation": False,
    "preemption_timeout": None,
    "project": "",
    "records_per_epoch": 0,
    "scheduling_unit": 100,
    "workspace": "",
}
_SECTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "optimizations": OptimizationsConfig().model_dump(),
    "profiling": {"enabled": False, "begin_on_batch": 0, "end_after_batch": None, "sync_timings": True},
    "resources": {
        "agent_label": None,
        "devices": [],
        "is_single_node": None,
        "max_slots": None,
        "native_parallel": False,
        "priority": None,
        "resource_pool": "",
        "shm_size": None,
        "slots_per_trial": 1,
        "weight": 1,
    },
    "reproducibility": {"experiment_seed": None},
}
_LENGTHS = ("min_checkpoint_period", "min_validation_period")


def determined_trial_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (as the master hands it to a task: pedl's keys and Determined's, with the seed its
    searcher was started with) with Determined's defaults filled in, each `null` replaced by its
    default, and lengths in `{unit: n}` form."""
    out = copy.deepcopy(config)
    for key, default in _TOP_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = copy.deepcopy(default)
    for section, defaults in _SECTION_DEFAULTS.items():
        given = out.get(section)
        given = given if isinstance(given, dict) else {}
        out[section] = {**defaults, **{k: v for k, v in given.items() if v is not None}}
    if out["reproducibility"]["experiment_seed"] is None:  # int(None) fails in det.ExperimentConfig
        out["reproducibility"]["experiment_seed"] = 0
    for key in _LENGTHS:
        out[key] = _length(out[key])
    searcher = out.get("searcher")
    if isinstance(searcher, dict):
        out["searcher"] = {
            "smaller_is_better": True,
            "source_trial_id": None,
            "source_checkpoint_uuid": None,
            **searcher,
        }
        if searcher.get("max_length") is not None:
            out["searcher"]["max_length"] = _length(searcher["max_length"])
    return out


def _length(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"batches": value}
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


def epoch_length_problems(config: Any) -> list[tuple[str, str]]:
    """A Trial class's lengths in epochs need records_per_epoch: Determined's legacy harness turns
    epochs into batches with it (and TFKerasTrial refuses to start without it)."""
    if not is_legacy_entrypoint(config.entrypoint) or config.records_per_epoch:
        return []
    lengths = {
        "searcher.max_length": config.searcher.max_length,
        "min_validation_period": config.min_validation_period,
        "min_checkpoint_period": config.min_checkpoint_period,
    }
    return [
        (
            where,
            "is in epochs, which a Trial class entrypoint needs records_per_epoch for: set "
            "records_per_epoch, or give the length in batches",
        )
        for where, length in lengths.items()
        if length is not None and length.epochs is not None
    ]


# Run by the task's own python3 before Determined's launcher: the task environment may have no pedl (an
# image of the user's), so this is plain Python. It names what is missing instead of a traceback or
# `/bin/sh: model_def:MyTrial: not found`, and exits UNLOADABLE_TRIAL_EXIT; then it execs the launcher.
_LOAD_CHECK = r"""
import importlib, importlib.metadata, importlib.util, json, os, sys, traceback
entrypoint = sys.argv[1]
def fail(message):
    print(f"pedl: the entrypoint {entrypoint} cannot run: {message}", file=sys.stderr, flush=True)
    sys.exit(EXIT_STATUS)
def version_of(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
def keras_problem(exc):
    # determined.keras (0.38.1) imports Keras 2's private modules (keras.src.saving.legacy, ...): Keras 3, which
    # tensorflow 2.16 and later bring, has none of them, and without tensorflow there is no Keras at all
    missing = (getattr(exc, "name", None) or "") if isinstance(exc, ImportError) else ""
    if missing.partition(".")[0] not in ("keras", "tensorflow"):
        return None
    where = os.sep + os.path.join("determined", "keras") + os.sep
    if not any(where in frame.filename for frame in traceback.extract_tb(exc.__traceback__)):
        return None
    tf = next(filter(None, map(version_of, ("tensorflow", "tensorflow-cpu", "tensorflow-macos"))), None)
    installed = f"tensorflow {tf}" if tf else "no tensorflow"
    if version_of("keras"):
        installed += f" and keras {version_of('keras')}"
    return (f"Determined 0.38.1's Keras support (determined.keras: TFKerasTrial, DeterminedCallback) needs "
            f"tensorflow 2.13 to 2.15 (Keras 2), and this task's environment ({sys.executable}) has "
            f"{installed}; importing it failed with {type(exc).__name__}: {exc}. Install tensorflow-cpu==2.15.* "
            f"(or tensorflow 2.13 to 2.15) in the task's environment")
def task_gpus():
    # what Determined's harness counts (ResourcesInfo.gpu_uuids, from the info file the agent writes), or
    # without that file the devices CUDA may see
    try:
        with open("/run/determined/info/resources.json") as f:
            return list(json.load(f).get("gpu_uuids") or [])
    except (OSError, ValueError, AttributeError):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        return [] if visible in ("", "-1", "none", "NoDevFiles") else visible.split(",")
if importlib.util.find_spec("determined") is None:
    fail(f"a Trial class entrypoint runs through Determined's harness, and the determined package (determined==0.38.1) "
         f"is not installed for {sys.executable} in this task's environment: install it in the task's image, or "
         f"put a python3 that has it first on the PATH (environment.environment_variables)")
module_name, _, class_name = entrypoint.partition(":")
sys.path.insert(0, os.getcwd())
try:
    spec = importlib.util.find_spec(module_name)
except (ImportError, ValueError):
    spec = None
if spec is None:
    fail(f"the model definition has no module {module_name} ({module_name.replace('.', '/')}.py)")
try:
    module = importlib.import_module(module_name)
except BaseException as exc:
    traceback.print_exc()
    keras = keras_problem(exc)
    if keras:
        fail(keras)
    missing = f" (no module named {exc.name})" if isinstance(exc, ModuleNotFoundError) and exc.name else ""
    fail(f"importing {module_name} failed{missing}: {type(exc).__name__}: {exc}")
trial_class = getattr(module, class_name, None)
if trial_class is None:
    fail(f"module {module_name} has no attribute {class_name}")
import determined
if not (isinstance(trial_class, type) and issubclass(trial_class, determined.LegacyTrial)):
    fail(f"{class_name} is not a Trial class (a subclass of determined.pytorch.PyTorchTrial, "
         f"determined.pytorch.deepspeed.DeepSpeedTrial or determined.keras.TFKerasTrial): it is {trial_class!r}")
# loaded only where the module subclassed it: deepspeed is not imported here for a PyTorchTrial
deepspeed_api = sys.modules.get("determined.pytorch.deepspeed")
if deepspeed_api is not None and issubclass(trial_class, deepspeed_api.DeepSpeedTrial) and not task_gpus():
    fail(f"{class_name} is a DeepSpeedTrial, which needs GPU slots: Determined 0.38.1's DeepSpeedTrialContext "
         f"refuses a trial without GPUs ('GPUs required for DeepSpeedTrial.') and puts the model on CUDA, and "
         f"this trial has none. Run it in a resource pool of GPU agents (resources.slots_per_trial GPUs)")
sys.stdout.flush()
launcher = ["python3", "-m", "determined.launch.torch_distributed", "--", "--trial", entrypoint]
# Determined launches every Trial class through torch.distributed, so a TFKerasTrial needs torch beside
# TensorFlow. Without torch, one slot on one node needs no launcher: Determined's harness runs it alone
keras_api = sys.modules.get("determined.keras")
without_torch = importlib.util.find_spec("torch") is None
if keras_api is not None and issubclass(trial_class, keras_api.TFKerasTrial) and without_torch:
    info = determined.get_cluster_info()
    if info is not None and (len(info.slot_ids) > 1 or len(info.container_addrs) > 1):
        fail(f"{class_name} is a TFKerasTrial on {len(info.slot_ids)} slot(s) of {len(info.container_addrs)} node(s): "
             f"Determined 0.38.1 runs a Trial class on several slots under its torch.distributed launcher, and "
             f"this task's environment ({sys.executable}) has no torch. Install torch in the task's environment, "
             f"or run the trial on one slot")
    launcher = ["python3", "-m", "determined.exec.harness", entrypoint]
os.execvp("python3", launcher)
""".replace("EXIT_STATUS", str(UNLOADABLE_TRIAL_EXIT))


def task_entrypoint(entrypoint: str | list[str]) -> str | list[str]:
    """What a trial's task runs for its configured entrypoint: a Trial class goes through Determined's
    launcher (`python3 -m determined.launch.torch_distributed -- --trial module:Class`, as
    determined.exec.launch runs it), after a check that it can be loaded (a one-slot TFKerasTrial in an
    environment without torch runs in Determined's harness alone); anything else as it is."""
    if not is_legacy_entrypoint(entrypoint):
        return entrypoint
    return ["python3", "-c", _LOAD_CHECK, entrypoint]
