"""verl's names (``ppo_trainer.yaml``, written dotted as in its command-line overrides) in
rltune: the common ones map, no-ops are accepted with the reason, and any other name under
verl's sections is refused by name (``config/compat/synonyms.py``). The job-level ones (the model's
path, the data files, the run's names) are ``JOB_KEYS``, read by ``config/verl_job.py``.

Example:
    >>> next(s for s in VERL if s.name == "actor_rollout_ref.rollout.n").target
    'n_rollouts'
"""

from __future__ import annotations

from rltune.config.compat.synonym_kinds import (
    UNSET_PROMPT,
    Synonym,
    both_clips,
    choice,
    no,
    noop,
    plus_prompt,
    syn,
    times_n,
)

V = "verl"
_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."
_M = "actor_rollout_ref.model."
_WARMUP = "a step count; -1 (the default) is 3% of the training steps"
_KL_IN_LOSS = "rltune puts the KL in the loss (verl's actor.kl_loss_coef), not in the reward"
_PERF = "rltune batches and pads by itself (micro_batch_size bounds one forward pass)"
_VLLM = "rltune sizes its engine itself (engine: vllm takes inference_gpu_memory_utilization)"

#: verl's top-level sections: a dict under one of them is flattened to dotted names, and a
#: name under one that the table lacks is refused as verl's.
SECTIONS = ("actor_rollout_ref", "data", "algorithm", "trainer", "critic", "reward_model",
            "custom_reward_function", "ray_init", "ray_kwargs")

#: verl's names that are keys of the job, not hyper-parameters: {name: (job key, why)}.
JOB_KEYS: dict[str, tuple[str, str]] = {
    _M + "path": ("model", "a top-level key of the job: model: <name, path or hub id>"),
    "data.train_files": ("datasets", "a training entry of the job's datasets"),
    "data.val_files": ("datasets", "a validation entry of the job's datasets"),
    _R + "name": ("engine", "a top-level key of the job: engine: vllm (verl's hf: builtin)"),
    "trainer.experiment_name": ("name", "the job's name (top level)"),
    "trainer.project_name": ("project", "the job's project (top level)"),
    "trainer.logger": ("observability", "the job's trackers (console: none needed)"),
}

#: Plain renames: {verl's name: rltune's}.
RENAMES = {
    _A + "optim.lr": "learning_rate", _A + "optim.weight_decay": "weight_decay",
    _A + "optim.lr_warmup_steps": "lr_warmup_steps", _A + "grad_clip": "max_grad_norm",
    "data.train_batch_size": "batch_size", "data.max_prompt_length": "max_prompt_length",
    _R + "n": "n_rollouts", _R + "temperature": "temperature", _R + "top_p": "top_p",
    _R + "gpu_memory_utilization": "inference_gpu_memory_utilization",
    _R + "tensor_model_parallel_size": "inference_tensor_parallel_size",
    _R + "val_kwargs.n": "val_n_rollouts", _R + "val_kwargs.temperature": "val_temperature",
    _A + "ppo_micro_batch_size_per_gpu": "micro_batch_size",
    _A + "ppo_micro_batch_size": "micro_batch_size",
    _A + "ppo_epochs": "ppo_epochs", _A + "use_kl_loss": "use_kl_loss",
    _A + "kl_loss_coef": "kl_loss_coef", _A + "clip_ratio_low": "clip_ratio_low",
    _A + "clip_ratio_high": "clip_ratio_high", _A + "clip_ratio_c": "clip_ratio_c",
    _A + "loss_agg_mode": "loss_agg_mode", _A + "entropy_coeff": "entropy_coeff",
    _M + "enable_gradient_checkpointing": "gradient_checkpointing",
    _M + "lora_rank": "lora_rank", _M + "lora_alpha": "lora_alpha",
    _M + "target_modules": "lora_target_modules",
    "actor_rollout_ref.ref.fsdp_config.param_offload": "reference_offload",
    "algorithm.norm_adv_by_std_in_grpo": "norm_adv_by_std",
    "algorithm.gamma": "gamma", "algorithm.lam": "lam",
    "algorithm.filter_groups.enable": "dynamic_sampling",
    "algorithm.filter_groups.max_num_gen_batches": "max_sampling_rounds",
    "reward_model.overlong_buffer.len": "overlong_buffer_len",
    "reward_model.overlong_buffer.penalty_factor": "overlong_penalty_factor",
    "critic.optim.lr": "critic_lr",
    "trainer.total_epochs": "n_epochs", "trainer.total_training_steps": "max_steps",
    "trainer.save_freq": "save_steps", "trainer.test_freq": "eval_steps",
    "trainer.seed": "seed", "trainer.n_gpus_per_node": "n_gpus_training",
    "trainer.nnodes": "nnodes_training",
}

#: Accepted and dropped whatever the value: (names, why).
_ANY_VALUE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("algorithm.kl_ctrl.kl_coef", "algorithm.kl_ctrl.type", "algorithm.kl_ctrl.horizon",
      "algorithm.kl_ctrl.target_kl"),
     "verl reads kl_ctrl only with use_kl_in_reward; " + _KL_IN_LOSS),
    (("trainer.default_local_dir", "trainer.log_val_generations", "trainer.val_before_train",
      "trainer.critic_warmup", "trainer.device"),
     "the job folder holds checkpoints and logs; rltune validates every eval_steps"),
    (("trainer.experiment_name", "trainer.project_name"),
     "in hyper_parameters: the job's name and project are top-level keys"),
    ((_M + "use_remove_padding", _A + "use_dynamic_bsz", _A + "ppo_max_token_len_per_gpu",
      _A + "ulysses_sequence_parallel_size", _R + "log_prob_micro_batch_size_per_gpu",
      _R + "log_prob_micro_batch_size", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
      "actor_rollout_ref.ref.log_prob_micro_batch_size", "actor_rollout_ref.hybrid_engine",
      _A + "fsdp_config.param_offload", _A + "fsdp_config.optimizer_offload",
      "data.val_batch_size", "data.filter_overlong_prompts", "data.truncation",
      "data.shuffle", "data.return_raw_chat", "critic.model.path"), _PERF),
    ((_R + "mode", _R + "enforce_eager", _R + "free_cache_engine", _R + "enable_chunked_prefill",
      _R + "max_num_batched_tokens", _R + "load_format", _R + "dtype"), _VLLM),
)

#: Accepted and dropped only as verl's defaults (or off): (names, harmless values, key, why).
_HARMLESS: tuple[tuple[tuple[str, ...], tuple, str, str], ...] = (
    (("algorithm.use_kl_in_reward",), (False,), "use_kl_loss", _KL_IN_LOSS),
    (("trainer.logger",), ("console", None), "observability",
     "trackers are the job's observability section (observability: {trackers: [wandb]}) or "
     "rltune train --tracker wandb"),
)

#: Refused whatever the value: {verl's name: (rltune's key to use, why)}.
REFUSED: dict[str, tuple[str, str]] = {
    _A + "optim.lr_warmup_steps_ratio": ("lr_warmup_steps", _WARMUP),
    "trainer.resume_mode": ("rltune train --resume", "resume from a checkpoint-<step> folder"),
    "data.prompt_key": ("rltune data convert --prompt-key",
                        "convert the data to rltune's rows once"),
    "custom_reward_function.path": ("functions", "a reward entry of the job's functions "
                                    "(rltune.sdk.plain.verl_reward wraps a compute_score)"),
    "custom_reward_function.name": ("functions", "a reward entry of the job's functions"),
    **{k: (key, why) for k, (key, why) in JOB_KEYS.items()
       if not k.startswith("trainer.")},  # in hyper_parameters; at the job's top level they map
}

_ESTIMATORS = {"grpo": "grpo", "gae": "ppo"}

_CONVERTED: tuple[Synonym, ...] = (
    syn("algorithm.adv_estimator", V, "algorithm",
        choice("algorithm", _ESTIMATORS, "adv_estimator"),
        why="grpo → algorithm grpo (with actor.policy_loss.loss_mode: gspo, rltune's sequence "
        "level: GSPO), gae → ppo; rltune's presets are gspo, grpo, dapo, ppo, opd"),
    syn("data.max_response_length", V, "max_length", plus_prompt,
        why=f"max_length = max_prompt_length + max_response_length {UNSET_PROMPT}",
        derived=True),
    syn(_A + "ppo_mini_batch_size", V, "ppo_mini_batch_size", times_n,
        why="verl counts prompts, rltune rollouts: the value is multiplied by n_rollouts",
        derived=True),
    syn(_A + "kl_loss_type", V, "kl_estimator", choice("kl_estimator", {
        "kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"},
        "kl_loss_type"), why="kl → k1, mse → k2, low_var_kl → k3"),
    syn(_A + "clip_ratio", V, "clip_ratio_low", both_clips,
        why="also clip_ratio_high unless clip_ratio_high is set", derived=True),
    syn(_A + "policy_loss.loss_mode", V, "importance_sampling_level",
        choice("importance_sampling_level", {"vanilla": "token", "gspo": "sequence"},
               "policy_loss.loss_mode"), why="vanilla → token, gspo → sequence"),
)

VERL: tuple[Synonym, ...] = (
    *(syn(name, V, target) for name, target in RENAMES.items()),
    *_CONVERTED,
    *(noop(name, V, why) for names, why in _ANY_VALUE for name in names),
    *(noop(name, V, why, harmless, target)
      for names, harmless, target, why in _HARMLESS for name in names),
    *(no(name, V, target, why) for name, (target, why) in REFUSED.items()),
)
