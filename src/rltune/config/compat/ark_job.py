"""Volcano Ark job definitions (``job.yaml`` / ``ModelCustomizationJob``) → rltune's job config.

Every Ark key either takes effect or is refused with a ``ConfigError`` naming it, what rltune
has instead, and the fix. The mapping (also in docs/ark.md):

===============================  ==========================================================
Ark                              rltune
===============================  ==========================================================
``name``                         ``name``
``customization_type``           GRPO → ``algorithm: grpo``; GRPOLoRA → also ``lora_rank``
                                 (16 unless given); PPO → ``algorithm: ppo`` (a critic, GAE);
                                 FinetuneSft → ``algorithm: sft`` (no ``custom_rl_pipeline``);
                                 FinetuneLoRA → also ``lora_rank``; DPO → ``algorithm: dpo``
                                 (preference rows, no ``custom_rl_pipeline``); DPOLoRA →
                                 also ``lora_rank``
``custom_rl_pipeline.type``      GRPOPipeline (GRPO types), PPOPipeline (→ ``algorithm: ppo``)
``model_reference``              ``model.name`` = ``foundation_model.name`` (``-version``
                                 appended when ``model_version`` is set) or
                                 ``custom_model_id``
``data``, ``tags``, ``project``  datasets, ``data_options`` and job metadata
                                 (:mod:`rltune.config.compat.ark_data`)
``custom_rl_pipeline.rollout``   the rollout function (``python_func`` = ``module:function``)
``custom_rl_pipeline.graders``   reward (``@single_grader``) / group reward
                                 (``@group_grader``) functions with their ``weight``
``plugin.envs``                  ``runtime.env`` of that function
``save_model_limit``             ``save_total_limit``
``enable_trajectory``            ``false``: ``ENABLE_TRAJECTORY=false`` in every function's
                                 ``runtime.env`` (no trajectories or traces stored)
===============================  ==========================================================

Ark's failure rule is kept: ``max_rollout_retries: 3`` and ``max_plugin_failures: 0`` (a
plugin that still returns FAILURE after its retries fails the job) unless the job sets them.

Hyper-parameters (Ark's values are strings; they are validated as numbers):
``batch_size``, ``num_generations`` → ``n_rollouts``, ``lr`` → ``learning_rate``,
``kl_coefficient`` → ``kl_loss_coef``, ``clip_ratio_low``, ``clip_ratio_high``,
``loss_agg_mode``, ``lr_warmup_steps``, ``temperature``, ``top_p``,
``num_iterations_per_batch`` → ``ppo_epochs`` (passes over each batch, TRL's μ),
``save_every_n_steps`` → ``save_steps`` with ``save_strategy: steps``,
``test_every_n_steps`` → ``eval_steps``, ``test_num_generations`` → ``val_n_rollouts``,
``num_steps`` → ``max_steps``; SFT's and DPO's ``epoch`` → ``n_epochs``, ``seq_len`` →
``max_length``;
``max_new_tokens`` → ``max_length`` = ``max_prompt_length`` +
``max_new_tokens``, ``test_top_p`` (accepted only when equal to ``top_p``: validation samples
like training), ``lora_rank``, ``lora_alpha``; rltune's own hyper-parameter names are accepted
as they are.

The kind of each grader comes from its decorator, read from the plugin's source with ``ast``
(nothing is imported), as are the literal ``runtime=Runtime(...)`` values: ``instance`` →
``cpu`` / ``memory_size``, ``timeout`` → the function's ``timeout``, ``max_concurrency`` →
``concurrency``, ``min_replicas`` / ``max_replicas`` → ``min_capacity`` / ``max_capacity``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rltune.config.compat.ark_data import ark_data, ark_tags
from rltune.config.compat.ark_source import PluginInstance, PluginSource, find_plugin
from rltune.config.switches import ENABLE_TRAJECTORY
from rltune.sdk.errors import ConfigError

#: Keys whose presence marks a job config as Ark's (``hyperparameters`` only without rltune's
#: own ``model`` / ``training``, so a misplaced rltune key is reported as rltune's).
ARK_MARKERS = ("custom_rl_pipeline", "customization_type", "model_reference")

_HP_RENAMES = {
    "batch_size": "batch_size", "num_generations": "n_rollouts", "lr": "learning_rate",
    "kl_coefficient": "kl_loss_coef", "clip_ratio_low": "clip_ratio_low",
    "clip_ratio_high": "clip_ratio_high", "loss_agg_mode": "loss_agg_mode",
    "lr_warmup_steps": "lr_warmup_steps", "temperature": "temperature", "top_p": "top_p",
    "num_iterations_per_batch": "ppo_epochs", "test_every_n_steps": "eval_steps",
    "test_num_generations": "val_n_rollouts", "num_steps": "max_steps",
    "lora_rank": "lora_rank", "lora_alpha": "lora_alpha",
}
_HP_SPECIAL = ("save_every_n_steps", "max_new_tokens", "test_top_p")
_TOP_KEYS = ("name", "customization_type", "model_reference", "hyperparameters", "data",
             "custom_rl_pipeline", "enable_trajectory", "save_model_limit", "tags", "project")
_LORA_DEFAULT_RANK = 16
#: customization_type → rltune's algorithm (and LoRA when the type says so).
_CTYPES = {"GRPO": "grpo", "GRPOLoRA": "grpo", "PPO": "ppo", "FinetuneSft": "sft",
           "FinetuneLoRA": "sft", "DPO": "dpo", "DPOLoRA": "dpo"}
#: The types that train on their rows alone: no custom_rl_pipeline, no graders.
_OFFLINE = ("sft", "dpo")
_PIPELINES = {"GRPOPipeline": "grpo", "PPOPipeline": "ppo"}
#: SFT's (and DPO's) own hyper-parameter names (Ark's supervised fine-tuning).
_SFT_RENAMES = {"epoch": "n_epochs", "seq_len": "max_length"}


def is_ark_job(data: Any) -> bool:
    """Whether a job dict is in Ark's shape."""
    if not isinstance(data, dict):
        return False
    return any(k in data for k in ARK_MARKERS) or (
        "hyperparameters" in data and "model" not in data and "training" not in data)


#: rltune hyper-parameter → the Ark key it comes from (for errors after translation).
_HP_ORIGIN = {**{v: k for k, v in _HP_RENAMES.items()}, "max_length": "max_new_tokens",
              "save_steps": "save_every_n_steps", "save_strategy": "save_every_n_steps"}
_TOP_ORIGIN = {"name": "name", "model": "model_reference", "datasets": "data",
               "functions": "custom_rl_pipeline", "save_total_limit": "save_model_limit"}


def ark_origin(path: tuple[Any, ...], ark: dict[str, Any]) -> Optional[tuple[Any, ...]]:
    """The key of the Ark job ``ark`` that a path of its translated config comes from, so an
    error after translation names what the user wrote; None when no Ark key made it.

    >>> ark_origin(("training", "hyper_parameters", "learning_rate"),
    ...            {"hyperparameters": {"lr": "x"}})
    ('hyperparameters', 'lr')
    >>> ark_origin(("model", "name"), {})
    ('model_reference',)
    """
    if path[:3] == ("training", "hyper_parameters", "save_total_limit") and \
            "save_model_limit" in ark:
        return ("save_model_limit",)
    if path[:2] == ("training", "hyper_parameters") and len(path) > 2:
        given = ark.get("hyperparameters") or {}
        for name in (_HP_ORIGIN.get(str(path[2])), str(path[2])):
            if name and isinstance(given, dict) and name in given:
                return ("hyperparameters", name)
        return ("hyperparameters",) if "hyperparameters" in ark else None
    top = _TOP_ORIGIN.get(str(path[0])) if path else None
    return (top,) if top else None


def ark_key_path(key: str) -> tuple[Any, ...]:
    """``"custom_rl_pipeline.graders[1].plugin"`` → ``("custom_rl_pipeline", "graders", 1,
    "plugin")``: an Ark key as a path for ``YamlDocument.line_of``."""
    out: list[Any] = []
    for part in key.split("."):
        name, *indexes = part.replace("]", "").split("[")
        out += [name, *(int(i) for i in indexes if i.isdigit())]
    return tuple(p for p in out if p != "")


def _err(key: str, message: str, hint: str, source: Optional[str]) -> ConfigError:
    where = f"{source}: {key}" if source else key
    return ConfigError(f"Ark job key '{key}': {message}", where=where, hint=hint)


def _model_name(ref: Any, source: Optional[str]) -> str:
    if not isinstance(ref, dict):
        raise _err("model_reference", "must be a mapping", "write model_reference: "
                   "{foundation_model: {name: nano}}", source)
    unknown = sorted(set(ref) - {"foundation_model", "custom_model_id"})
    if unknown:
        raise _err(f"model_reference.{unknown[0]}", "has no counterpart in rltune",
                   "use foundation_model or custom_model_id", source)
    if ref.get("custom_model_id") and ref.get("foundation_model"):
        raise _err("model_reference", "sets both foundation_model and custom_model_id",
                   "keep one of them", source)
    if ref.get("custom_model_id"):
        return str(ref["custom_model_id"])
    fm = ref.get("foundation_model") or {}
    extra = sorted(set(fm) - {"name", "model_version"})
    if extra:
        raise _err(f"model_reference.foundation_model.{extra[0]}",
                   "has no counterpart in rltune", "set name (and model_version)", source)
    if not fm.get("name"):
        raise _err("model_reference.foundation_model.name", "is missing",
                   "name a model: a demo size (nano), a directory or a name under "
                   "$RLTUNE_HOME/models", source)
    version = str(fm.get("model_version") or "")
    return f"{fm['name']}-{version}" if version else str(fm["name"])


def _hyper_parameters(hp: Any, ctype: str, source: Optional[str]) -> dict[str, Any]:
    from rltune.config.hyperparams import HyperParameters

    own = set(HyperParameters.model_fields)
    hp = dict(hp or {})
    out: dict[str, Any] = {}
    renames = {**_HP_RENAMES, **(_SFT_RENAMES if _CTYPES[ctype] in _OFFLINE else {})}
    for key, value in hp.items():
        if key in renames:
            out[renames[key]] = _value(key, renames[key], value, source)
        elif key in _HP_SPECIAL:
            continue
        elif key in own:
            out[key] = _value(key, key, value, source)
        else:
            raise _err(f"hyperparameters.{key}", "has no counterpart in rltune",
                       f"use one of Ark's {sorted([*_HP_RENAMES, *_HP_SPECIAL])} or an rltune "
                       "hyper-parameter (docs/ark.md)", source)
    if "save_every_n_steps" in hp:
        out["save_steps"] = hp["save_every_n_steps"]
        out.setdefault("save_strategy", "steps")
    if "max_new_tokens" in hp:
        prompt = int(out.get("max_prompt_length",
                             HyperParameters.model_fields["max_prompt_length"].default))
        try:
            out["max_length"] = prompt + int(str(hp["max_new_tokens"]))
        except ValueError:
            raise _err("hyperparameters.max_new_tokens", f"{hp['max_new_tokens']!r} is not an "
                       "integer", "write e.g. '1024'", source) from None
    if "test_top_p" in hp and float(hp["test_top_p"]) != float(out.get("top_p", 1.0)):
        raise _err("hyperparameters.test_top_p", f"is {hp['test_top_p']} but top_p is "
                   f"{out.get('top_p', 1.0)}; rltune validates with the training sampling",
                   "set test_top_p equal to top_p (or remove it)", source)
    if "seq_len" in hp and "max_prompt_length" not in out:
        # SFT has no prompt budget of its own; keep the rule max_prompt_length < max_length
        out.setdefault("max_prompt_length", max(1, int(str(out["max_length"])) // 2))
    out.setdefault("algorithm", _CTYPES[ctype])
    if _CTYPES[ctype] not in _OFFLINE:
        out.setdefault("max_plugin_failures", 0)  # Ark: a plugin's FAILURE fails the job
        out.setdefault("max_rollout_retries", 3)  # after Ark's 3 retries
    if ctype in ("GRPOLoRA", "FinetuneLoRA", "DPOLoRA"):
        out.setdefault("lora_rank", _LORA_DEFAULT_RANK)
    return out


def _value(ark_key: str, key: str, value: Any, source: Optional[str]) -> Any:
    """``value`` unless it is not of the rltune field's type: an error naming the Ark key."""
    from typing import Annotated

    import pydantic

    from rltune.config.hyperparams import HyperParameters

    field = HyperParameters.model_fields[key]
    try:
        pydantic.TypeAdapter(Annotated[(field.annotation, *field.metadata)]).validate_python(
            value)
    except pydantic.ValidationError as exc:
        raise _err(f"hyperparameters.{ark_key}", f"{value!r}: {exc.errors()[0]['msg']}",
                   f"fix the value of {ark_key} (docs/ark.md)", source) from None
    return value


def _runtime(ps: PluginSource) -> tuple[dict[str, Any], Optional[int]]:
    rt = ps.runtime
    out: dict[str, Any] = {}
    if "instance" in rt:
        inst = PluginInstance(rt["instance"])
        out.update(cpu=inst.cpu, memory_size=inst.memory_mb)
    if "max_concurrency" in rt:
        out["concurrency"] = int(rt["max_concurrency"])
    if "min_replicas" in rt:
        out["min_capacity"] = int(rt["min_replicas"])
    if "max_replicas" in rt:
        out["max_capacity"] = int(rt["max_replicas"])
    timeout = rt.get("timeout")
    return out, int(timeout) if timeout is not None else None


def _function(entry: Any, key: str, want: tuple[str, ...], root: Path,
              source: Optional[str]) -> dict[str, Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("plugin"), dict):
        raise _err(key, "needs a plugin: {name, python_func, envs}", "write "
                   "plugin: {python_func: plugins.my_module:my_function}", source)
    plugin = entry["plugin"]
    for sub in plugin:
        if sub not in ("name", "python_func", "envs"):
            raise _err(f"{key}.plugin.{sub}", "has no counterpart in rltune",
                       "keep name, python_func and envs", source)
    for sub in entry:
        if sub not in ("plugin", "weight"):
            raise _err(f"{key}.{sub}", "has no counterpart in rltune", "keep plugin and weight",
                       source)
    if "weight" in entry and "rollout" in want:
        raise _err(f"{key}.weight", "a rollout has no weight", "remove it", source)
    func = plugin.get("python_func")
    ps = find_plugin(str(func or ""), root, where=f"{source or ''}: {key}.plugin.python_func")
    if ps.kind not in want:
        raise _err(f"{key}.plugin.python_func", f"{func} is a @{ps.kind} plugin",
                   f"use a {' or '.join('@' + w for w in want)} plugin here", source)
    ftype = {"rollout": "rollout", "single_grader": "reward",
             "group_grader": "group_reward"}[ps.kind]
    runtime, timeout = _runtime(ps)
    if plugin.get("envs"):
        runtime["env"] = {str(k): str(v) for k, v in plugin["envs"].items()}
    fn: dict[str, Any] = {"type": ftype, "name": str(plugin.get("name") or ps.name),
                          "fcmodel": {"zipdir": "./", "classpath": str(func)}}
    if runtime:
        fn["runtime"] = runtime
    if timeout is not None:
        fn["timeout"] = timeout
    if "weight" in entry:
        fn["weight"] = entry["weight"]
    return fn


def _functions(pipeline: Any, root: Path, source: Optional[str]) -> list[dict[str, Any]]:
    if not isinstance(pipeline, dict):
        raise _err("custom_rl_pipeline", "must be a mapping with graders (and rollout)",
                   "see docs/ark.md", source)
    kind = pipeline.get("type", "GRPOPipeline")
    if kind not in _PIPELINES:
        raise _err("custom_rl_pipeline.type", f"{kind} has no counterpart in rltune",
                   f"use one of {sorted(_PIPELINES)}", source)
    for sub in pipeline:
        if sub not in ("graders", "rollout", "type"):
            raise _err(f"custom_rl_pipeline.{sub}", "has no counterpart in rltune",
                       "keep graders and rollout", source)
    graders = pipeline.get("graders") or []
    if not graders:
        raise _err("custom_rl_pipeline.graders", "needs at least one grader",
                   "add a @single_grader or @group_grader plugin", source)
    fns = []
    if pipeline.get("rollout") is not None:
        fns.append(_function(pipeline["rollout"], "custom_rl_pipeline.rollout", ("rollout",),
                             root, source))
    else:  # Ark's default: one model call per sample, as an Ark plugin so graders see it
        fns.append({"type": "rollout", "name": "single_turn",
                    "fcmodel": {"zipdir": "./", "classpath": "rltune.ark.builtin:single_turn"}})
    for i, g in enumerate(graders):
        fns.append(_function(g, f"custom_rl_pipeline.graders[{i}]",
                             ("single_grader", "group_grader"), root, source))
    return fns


def ark_job_to_config(data: dict[str, Any], *, root: Path | str,
                      source: Optional[str] = None) -> dict[str, Any]:
    """Translate an Ark job dict into an rltune job dict (validate it with ``JobConfig``).

    ``root`` is the workspace the plugins' modules are found in (the job file's folder).
    """
    for key in data:
        if key not in _TOP_KEYS:
            raise _err(key, "has no counterpart in rltune", f"keep {list(_TOP_KEYS)}", source)
    ctype = str(data.get("customization_type") or "GRPO")
    if ctype not in _CTYPES:
        raise _err("customization_type", f"{ctype} has no counterpart in rltune (it trains "
                   "with RL from graders, supervised or from preference pairs)",
                   f"use one of {list(_CTYPES)}", source)
    _check_pipeline_type(data, ctype, source)
    if data.get("enable_trajectory") not in (None, True, False):
        raise _err("enable_trajectory", f"{data['enable_trajectory']!r} is not true or false",
                   "write enable_trajectory: false (or true)", source)
    sft = _CTYPES[ctype] in _OFFLINE
    hp = _hyper_parameters(data.get("hyperparameters"), ctype, source)  # a bad value first
    if "custom_rl_pipeline" not in data and not sft:
        raise _err("custom_rl_pipeline", "is missing", "add graders (and a rollout)", source)
    datasets, data_options = ark_data(data.get("data"), source)
    if data.get("save_model_limit") is not None:
        hp["save_total_limit"] = data["save_model_limit"]
    functions = [] if sft else _functions(data["custom_rl_pipeline"], Path(root), source)
    if data.get("enable_trajectory") is False:  # as ENABLE_TRAJECTORY=false does
        for fn in functions:
            fn.setdefault("runtime", {}).setdefault("env", {})[ENABLE_TRAJECTORY] = "false"
    out: dict[str, Any] = {
        "model": {"name": _model_name(data.get("model_reference"), source)},
        "functions": functions,
        "datasets": datasets,
        "training": {"type": "reinforcement", "hyper_parameters": hp},
    }
    if data_options:
        out["data_options"] = data_options
    if data.get("tags"):
        out["tags"] = ark_tags(data["tags"], source)
    if data.get("project"):
        out["project"] = str(data["project"])
    if data.get("name"):
        out["name"] = str(data["name"])
    return out


def _check_pipeline_type(data: dict[str, Any], ctype: str, source: Optional[str]) -> None:
    """An SFT or DPO job has no RL pipeline; an RL job's pipeline type matches its
    customization."""
    pipeline = data.get("custom_rl_pipeline")
    if _CTYPES[ctype] in _OFFLINE:
        if pipeline is not None:
            what = ("supervised fine-tuning on the messages rows" if _CTYPES[ctype] == "sft"
                    else "preference optimisation on chosen / rejected rows")
            raise _err("custom_rl_pipeline", f"{ctype} is {what}: it runs no rollouts or "
                       "graders", "remove custom_rl_pipeline, or use GRPO or PPO", source)
        return
    kind = pipeline.get("type") if isinstance(pipeline, dict) else None
    if kind in _PIPELINES and _PIPELINES[kind] != _CTYPES[ctype]:
        raise _err("custom_rl_pipeline.type", f"{kind} does not match customization_type "
                   f"{ctype}", f"use {'PPOPipeline' if ctype == 'PPO' else 'GRPOPipeline'}",
                   source)


def ark_lines(ark: dict[str, Any], doc: Any) -> Any:
    """YAML lines of rltune's paths: those of the Ark keys they came from."""

    def line_of(path: tuple[Any, ...]) -> int | None:
        origin = ark_origin(path, ark)
        return doc.line_of(origin) if doc and origin else None

    return line_of


def ark_label(ark: dict[str, Any]) -> Any:
    """A field named by its Ark key (and rltune's path)."""
    from rltune.config.errors import format_path

    def label(path: tuple[Any, ...]) -> str:
        origin = ark_origin(path, ark)
        return f"{format_path(origin)} (rltune's {format_path(path)})" if origin else \
            format_path(path)

    return label


def at_ark_line(exc: ConfigError, doc: Any) -> ConfigError:
    """A translation error ``"<file>: <Ark key>"`` located at that key's line."""

    where = exc.where or ""
    if doc is None or not doc.source or not where.startswith(f"{doc.source}: "):
        return exc
    key = where[len(doc.source) + 2:]
    line = doc.line_of(ark_key_path(key))
    return ConfigError(exc.message, where=f"{doc.source}:{line}" if line else where,
                       hint=exc.hint)
