"""Training hyper-parameters: the cloud SDK's names and ranges, the algorithm knobs
(``config/algorithm.py``), and the couplings between them (every key: docs/config.md).

A broken coupling is reported against the field to change, with the value, the rule and a fix
(the pydantic error's ``ctx`` carries ``field`` and ``fix``; ``rltune.config.errors`` turns it
into a ``ConfigError``).

Example:
    >>> from rltune.config import HyperParameters
    >>> hp = HyperParameters(batch_size="4", n_rollouts=4, learning_rate="2e-6")
    >>> hp.learning_rate, hp.mini_batch_rollouts
    (2e-06, 16)
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, Optional, Union

from pydantic import Field, field_validator, model_validator

from rltune.config._base import coupling as _coupling
from rltune.config.algorithm import KNOBS, AlgorithmName, KnobOverrides, misplaced_knob
from rltune.config.compat.synonyms import translate
from rltune.config.trainer_layout import check_data_parallel, refuse_distributed
from rltune.names import OFFLINE_ALGORITHMS, REPLICA_BACKENDS, literal

#: Streaming rollouts (trainer/stream.py) start groups at most this many versions ahead.
MAX_STALENESS_SUPPORTED = 8

#: Hyper-parameters of rollouts and RL losses: an ``algorithm: sft`` or ``dpo`` job refuses
#: them (and every algorithm knob but its own), which would otherwise be ignored.
SFT_REFUSED = ("n_rollouts", "ppo_mini_batch_size", "kl_loss_coef", "temperature",
               "val_temperature", "top_p",
               "max_staleness", "partial_rollouts", "scale_lr_by_staleness", "val_n_rollouts",
               "opd_reward_weight", "stop_at_validation_reward", "max_rollout_retries",
               "max_tokens")

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


class HyperParameters(KnobOverrides):
    """All training knobs. Unset optional knobs take the algorithm preset's value."""

    # --- the 15 cloud hyper-parameters (defaults sized for a small CPU run) ---
    algorithm: AlgorithmName = "gspo"
    batch_size: int = Field(8, ge=1, le=100000, description="prompts per step")
    n_rollouts: int = Field(4, ge=1, le=1024, description="rollouts per prompt")
    ppo_mini_batch_size: Optional[int] = Field(
        None, ge=1, le=100000,
        description="rollouts per optimizer step; unset = the whole step batch (one update)",
    )
    learning_rate: float = Field(1e-6, ge=0, le=1)
    lr_scheduler_type: Literal["cosine", "linear", "constant"] = "constant"
    lr_warmup_steps: int = Field(-1, ge=-1, description="-1 = auto (3% of the training steps)")
    n_epochs: int = Field(1, ge=1, le=200)
    max_steps: Optional[int] = Field(
        None, ge=1, le=10_000_000,
        description="training steps; set, it replaces n_epochs x steps per epoch (the data "
        "repeats as needed). Volcano Ark's num_steps",
    )
    kl_loss_coef: float = Field(0.001, ge=0, le=10)
    max_length: int = Field(
        2048, ge=1, le=131072,
        description="prompt + response tokens; unset: 2048 or the model's context "
        "(max_position_embeddings), whichever is smaller")
    max_prompt_length: int = Field(
        1024, ge=1, le=131072,
        description="prompt tokens; unset: 1024, or half of max_length when that leaves no "
        "room, or what the model's context leaves after the response budget of a max_length "
        "set beyond it")
    eval_steps: int = Field(10, ge=1, le=999999)
    save_steps: int = Field(50, ge=1, le=999999)
    save_strategy: Literal["steps", "epoch", "no"] = "epoch"
    save_total_limit: int = Field(1, ge=1, le=200)

    # --- distributed layout (the rules: config/trainer_layout.py) ---
    expert_model_parallel_size: Optional[int] = Field(None, ge=1, le=1024)
    inference_gpu_memory_utilization: Optional[float] = Field(None, gt=0, le=1)
    inference_tensor_parallel_size: Optional[int] = Field(
        None, ge=1, le=1024,
        description="engine: vllm only: vLLM's tensor_parallel_size, CUDA GPUs per engine "
        "(needs that many on the job's machine)")
    #: rltune's own: engine replicas (built-in or vLLM) behind the policy gateway
    #: (``engine/group.py``), in this process (``local``) or as Ray actors (``ray``).
    inference_replicas: Optional[int] = Field(None, ge=1, le=256)
    inference_replica_backend: Optional[literal(REPLICA_BACKENDS)] = None  # type: ignore[valid-type]
    n_gpus_rollout: Optional[int] = Field(
        None, ge=0, le=100000,
        description="CUDA GPUs of the inference engine, on the job's machine: N > 1 = N "
        "built-in engine replicas, one per GPU (cuda:0..N-1), or with engine: vllm one "
        "engine of inference_tensor_parallel_size = N GPUs; 0 or 1 = one engine on device")
    n_gpus_training: Optional[int] = Field(
        None, ge=0, le=100000,
        description="trainer ranks per node (data parallel, FSDP2): one GPU each on CUDA, "
        "one process each on the CPU; 0 or 1 = one process (see nnodes_training)")
    nnodes_rollout: Optional[int] = Field(None, ge=1, le=10000)
    nnodes_training: Optional[int] = Field(
        None, ge=1, le=10000,
        description="with a Ray cluster (function_backend: ray or --ray-address): trainer ranks "
        "are Ray actors, nnodes_training x n_gpus_training of them (n_gpus_training unset: 1); "
        "without a cluster only 1")
    #: rltune's own: how the Ray placement group puts the trainer ranks on the nodes.
    trainer_placement: Optional[Literal["spread", "pack", "strict_spread", "strict_pack"]] = \
        Field(None, description="Ray placement of the trainer ranks (one bundle each) when "
              "nnodes_training is set on a Ray cluster: Ray's SPREAD (default), PACK, "
              "STRICT_SPREAD or STRICT_PACK")
    #: rltune's own: what one Ray trainer rank reserves (``trainer/parallel/ray_ranks.py``).
    trainer_cpus_per_rank: Optional[float] = Field(
        None, gt=0, le=1024, description="CPUs each trainer rank reserves on its Ray node when "
        "nnodes_training is set (its torch threads: the whole CPUs of it, at least 1). Default: "
        "on the CPU the job's torch threads, at most half the smallest node's CPUs; on CUDA 1 "
        "per GPU rank")
    checkpoint_format: Literal["full", "sharded"] = Field(
        "full", description="full: Hugging Face weights + optimizer state in one process's "
        "format; sharded: each trainer rank writes its torch.distributed.checkpoint shards "
        "(resume on any number of ranks; models export consolidates)")
    pipeline_model_parallel_size: Optional[int] = Field(None, ge=1, le=1024)
    sequence_parallel_size: Optional[int] = Field(None, ge=1, le=1024)
    tensor_model_parallel_size: Optional[int] = Field(None, ge=1, le=1024)

    # --- algorithm knobs: declared in rltune.config.algorithm.KNOBS; each is a field of
    # KnobOverrides (None = the preset's value). OPD's reward weight is not a preset knob. ---
    opd_reward_weight: Optional[float] = Field(
        None, ge=0, le=1000,
        description="OPD with reward functions: each token's advantage is the teacher term plus "
        "this weight x its rollout's group reward advantage; unset = 1.0, 0 = rewards are "
        "metrics only (pg_opd jobs with a reward or group_reward function only)",
    )

    # --- optimisation and sampling (rltune's own; cloud jobs leave them at defaults) ---
    max_grad_norm: float = Field(1.0, gt=0, le=1e6)
    weight_decay: float = Field(0.01, ge=0, le=1)
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="cosine floor as a fraction")
    temperature: float = Field(
        1.0, gt=0, le=10,
        description="sampling temperature of training rollouts; the trainer's log-probs are "
        "those of the same tempered distribution (the policy trained is the one sampled)",
    )
    val_temperature: Optional[float] = Field(
        None, ge=0, le=10,
        description="sampling temperature of validation rollouts (0: greedy); unset = "
        "temperature. Exploring at a higher training temperature, validate the policy as it "
        "will be served",
    )
    top_p: float = Field(1.0, gt=0, le=1)
    micro_batch_size: Optional[int] = Field(
        None, ge=1, le=100000, description="rows per forward pass (memory); unset = all"
    )
    bf16: bool = Field(
        False,
        description="train in bf16: the policy's weights are bf16 (or fp32 with bf16 autocast "
        "when fp32_master_weights is set); log-prob softmax stays fp32",
    )
    fp32_master_weights: bool = Field(
        False,
        description="with bf16: keep fp32 weights and optimizer state and run the forward "
        "passes under bf16 autocast (twice the weight memory, no lost small updates)",
    )

    # --- device placement (rltune's own; trainer/device.py) ---
    device: str = Field(
        "auto",
        pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$",
        description="where the policy, reference, optimizer state and built-in engine live: "
        "auto (CUDA when present, else CPU), cpu, cuda or cuda:<index>",
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in the backward pass (less memory, ~30% "
        "more compute)",
    )
    reference_offload: bool = Field(
        False,
        description="keep the frozen KL reference and the OPD teacher in CPU memory and move "
        "them to the device only for their forward passes",
    )
    logprob_chunk_mib: int = Field(
        256, ge=1, le=65536,
        description="memory for fp32 logits when computing log-probs: a micro-batch whose "
        "B x T x V logits need more runs the output head in chunks of this size (the backward "
        "pass recomputes each chunk), so large vocabularies fit",
    )
    max_failed_step_share: float = Field(
        0.5, ge=0, le=1,
        description="a step fails when none of its rollouts succeeded; the job ends FAILED "
        "once more than this share of its steps failed (1 = never)",
    )
    max_rollout_retries: int = Field(2, ge=0, le=20)
    max_plugin_failures: Optional[int] = Field(
        None, ge=0,
        description="Ark plugins: the job fails once more than this many rollouts ended with "
        "a plugin's FAILURE (or exception) after their retries; an Ark job.yaml sets 0, as on "
        "Ark; unset = such rollouts are dropped and counted like any failure",
    )
    # --- the asynchronous pipeline (rltune's own; trainer/scheduler.py) ---
    max_staleness: int = Field(
        0, ge=0, le=MAX_STALENESS_SUPPORTED,
        description="0 = synchronous (rollouts, then the update, every step). N >= 1 (at most "
        f"{MAX_STALENESS_SUPPORTED}) = "
        "streaming rollouts: groups sample continuously, a step trains on the first "
        "batch_size groups to finish (the rest carry over) and new groups start at most N "
        "weight versions behind the policy that trains on them; the loss corrects for it "
        "(decoupled PPO) and rollouts more than N versions old are dropped and counted",
    )
    partial_rollouts: bool = Field(
        False,
        description="with max_staleness >= 1: a rollout in flight when the weights change "
        "continues on the new weights (every token keeps the version it was sampled with); "
        "false = the weights change only once the in-flight rollouts have finished",
    )
    scale_lr_by_staleness: bool = Field(
        False,
        description="with max_staleness >= 1: each update's learning rate is divided by 1 + "
        "the mean staleness of its sampled tokens (in weight versions), so an update on "
        "rollouts of older weights takes a smaller step; false = the schedule's rate at any "
        "staleness",
    )
    max_concurrent_requests: Optional[int] = Field(
        None, ge=1, le=100000,
        description="backpressure: the most chat calls the policy gateway serves at once; "
        "beyond it a call gets 429 with Retry-After and the rollout's client retries after "
        "that wait (the OpenAI clients and the built-in rollout do). Unset = no limit",
    )
    stop_at_validation_reward: Optional[float] = Field(
        None, ge=-1e9, le=1e9,
        description="end the job after the first validation (every eval_steps) whose mean@1 "
        "reward reaches this value, checkpointing that step unless save_strategy is no; "
        "unset = train every step. Needs a validation dataset",
    )
    max_wall_time: Optional[float] = Field(
        None, gt=0, le=1e8,
        description="budget in seconds of training (from the first step): the job ends at the "
        "first step boundary past it, checkpointing that step unless save_strategy is no; "
        "unset = no limit",
    )
    max_tokens: Optional[int] = Field(
        None, ge=1, le=10**15,
        description="budget in sampled tokens (prompt + response of every training rollout): "
        "the job ends at the first step boundary past it, checkpointing that step unless "
        "save_strategy is no; unset = no limit",
    )
    val_n_rollouts: int = Field(
        1, ge=1, le=64,
        description="sampled rollouts per validation prompt; mean@1 is their average (more "
        "rollouts = a less noisy estimate of the same number)",
    )
    seed: int = Field(42, ge=0, le=2**32 - 1)

    # --- LoRA (rltune's own; trainer/lora.py). lora_rank 0 = full fine-tuning ---
    lora_rank: int = Field(
        0, ge=0, le=1024,
        description="LoRA adapter rank; 0 = full fine-tuning (all weights train and the KL "
        "reference is a frozen copy). With LoRA only the adapters train and the reference is "
        "the same model with its adapters disabled",
    )
    lora_alpha: Optional[float] = Field(
        None, gt=0, le=100000,
        description="LoRA scale numerator (the update is alpha/rank · B·A); unset = 2 x "
        "lora_rank, so the scale stays 2 whatever the rank",
    )
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="dropout on the adapters' input")
    lora_target_modules: Union[str, list[str]] = Field(
        "all-linear",
        description="modules that get adapters: 'all-linear' (every linear layer of the "
        "attention and MLP blocks, not the output head) or names such as "
        "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj (list or comma-separated)",
    )

    @classmethod
    def _normalize_problems(cls, data: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        # TRL's and verl's names (config/compat/synonyms.py): renamed, dropped as no-ops, or refused
        # naming ours, every one at once.
        return translate(data, lambda key: cls.model_fields[key].default)

    @field_validator("lora_target_modules", mode="before")
    @classmethod
    def _target_modules(cls, value: Any) -> Any:
        # "q_proj, v_proj" (one YAML string) means the list; "all-linear" stays peft's keyword.
        if isinstance(value, str) and value.strip() != "all-linear":
            value = [v.strip() for v in value.split(",")]
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, (list, tuple)):
            names = [str(v).strip() for v in value if str(v).strip()]
            bad = [n for n in names if not _MODULE_NAME.match(n)]
            if not names or bad:
                rule = (f"{', '.join(repr(b) for b in bad)} is not a module name"
                        if bad else "names no module")
                raise ValueError(
                    f"{rule}; write 'all-linear' or module names like q_proj,v_proj"
                )
            return names
        return value

    @property
    def lora_scale_alpha(self) -> float:
        """``lora_alpha`` with the default resolved: 2 x ``lora_rank``."""
        return self.lora_alpha if self.lora_alpha is not None else 2.0 * self.lora_rank

    @property
    def trainer_ranks(self) -> int:
        """Data-parallel trainer ranks: ``nnodes_training`` x ``n_gpus_training`` (each unset
        or 0: 1)."""
        return max(1, self.nnodes_training or 1) * max(1, self.n_gpus_training or 1)

    @property
    def trainer_ranks_key(self) -> str:
        """The key that makes ``trainer_ranks`` > 1, for errors."""
        return "nnodes_training" if (self.nnodes_training or 1) > 1 else "n_gpus_training"

    @property
    def mini_batch_rollouts(self) -> int:
        """Rollouts per optimizer step (``ppo_mini_batch_size`` or the whole step batch)."""
        return self.ppo_mini_batch_size or self.batch_size * self.n_rollouts

    def steps_per_epoch(self, n_rows: int) -> int:
        """Training steps in one pass over ``n_rows`` prompts (an incomplete batch is dropped)."""
        return n_rows // self.batch_size

    def total_steps(self, n_rows: int) -> int:
        if self.max_steps is not None:
            return self.max_steps
        return self.n_epochs * self.steps_per_epoch(n_rows)

    def warmup_steps(self, total_steps: int) -> int:
        """``lr_warmup_steps`` with -1 resolved: 3% of the steps, rounded up."""
        if self.lr_warmup_steps >= 0:
            return self.lr_warmup_steps
        return math.ceil(0.03 * total_steps)

    @model_validator(mode="after")
    def _couplings(self) -> HyperParameters:
        total = self.batch_size * self.n_rollouts
        if self.ppo_mini_batch_size is not None and self.ppo_mini_batch_size > total:
            raise _coupling(
                "ppo_mini_batch_size", self.ppo_mini_batch_size,
                f"must be <= batch_size x n_rollouts = {self.batch_size} x {self.n_rollouts}"
                f" = {total}",
                f"set ppo_mini_batch_size to at most {total}, or raise batch_size/n_rollouts",
            )
        if "max_prompt_length" not in self.model_fields_set:  # the length rule's default
            from rltune.config.lengths import derived_prompt

            self.__dict__["max_prompt_length"] = derived_prompt(self.max_length)
        if self.max_prompt_length >= self.max_length:
            raise _coupling(
                "max_prompt_length", self.max_prompt_length,
                f"must be < max_length ({self.max_length}) to leave room for a response",
                f"lower max_prompt_length below {self.max_length} or raise max_length",
            )
        if self.max_steps is not None and self.n_epochs != 1:
            raise _coupling(
                "max_steps", self.max_steps,
                "sets the number of steps itself, so n_epochs would be ignored",
                "remove n_epochs or max_steps",
            )
        if self.n_gpus_training:
            tp = self.tensor_model_parallel_size or 1
            pp = self.pipeline_model_parallel_size or 1
            if self.n_gpus_training % (tp * pp):
                raise _coupling(
                    "n_gpus_training", self.n_gpus_training,
                    f"must equal tp x pp x dp; tensor_model_parallel_size ({tp}) x "
                    f"pipeline_model_parallel_size ({pp}) = {tp * pp} does not divide it",
                    f"use a multiple of {tp * pp} GPUs or change the parallel sizes",
                )
        response_budget = self.max_length - self.max_prompt_length
        if self.overlong_buffer_len is not None and self.overlong_buffer_len > response_budget:
            raise _coupling(
                "overlong_buffer_len", self.overlong_buffer_len,
                f"must be <= max_length - max_prompt_length = {response_budget}",
                f"set overlong_buffer_len to at most {response_budget} (or -1 for auto)",
            )
        if self.lora_rank == 0:
            # LoRA settings without a rank would be silently ignored: full fine-tuning would
            # run while the user believes adapters train.
            for name, default in (("lora_alpha", None), ("lora_dropout", 0.0),
                                  ("lora_target_modules", "all-linear")):
                value = getattr(self, name)
                if value != default:
                    raise _coupling(
                        name, value,
                        "only applies with LoRA, and lora_rank is 0 (full fine-tuning)",
                        f"set lora_rank (e.g. 16) to train LoRA adapters, or remove {name}",
                    )
        if self.fp32_master_weights and not self.bf16:
            raise _coupling(
                "fp32_master_weights", True, "only applies with bf16 (weights are fp32 already)",
                "set bf16: true, or remove fp32_master_weights",
            )
        if (misplaced := misplaced_knob(self)) is not None:
            raise _coupling(misplaced[0], getattr(self, misplaced[0]),
                            f"only applies to algorithm {' or '.join(misplaced[1])}, and "
                            f"algorithm is {self.algorithm}",
                            f"set algorithm: {misplaced[1][0]}, or remove {misplaced[0]}")
        if self.algorithm in OFFLINE_ALGORITHMS:
            # a value other than the default: a serialised config repeats the defaults
            rl_only = [k for k in (*SFT_REFUSED, *(n for n in KNOBS if KNOBS[n].overridable
                                                   and self.algorithm not in KNOBS[n].only))
                       if getattr(self, k) != type(self).model_fields[k].default]
            if rl_only:
                what = ("supervised on the rows' messages" if self.algorithm == "sft" else
                        "preference pairs against the reference, whose strength is dpo_beta")
                raise _coupling(rl_only[0], getattr(self, rl_only[0]),
                                f"only applies to RL algorithms, and algorithm is "
                                f"{self.algorithm} ({what}, no rollouts)",
                                f"remove {rl_only[0]}, or use an RL algorithm")
        if self.algorithm in ("ppo", *OFFLINE_ALGORITHMS) and self.trainer_ranks > 1:
            key = self.trainer_ranks_key
            what = ("algorithm ppo trains its critic in one process" if self.algorithm == "ppo"
                    else f"algorithm {self.algorithm} trains in one process")
            raise _coupling(key, getattr(self, key), what,
                            f"set {key}: 1, or use gspo, grpo or dapo")
        _check_async(self)
        refuse_distributed(self)
        check_data_parallel(self)
        return self


def _check_async(hp: HyperParameters) -> None:
    """The asynchronous pipeline's couplings (``trainer/scheduler.py``)."""
    for key, why in (
        ("partial_rollouts", "a synchronous step never changes the weights while rollouts run"),
        ("scale_lr_by_staleness", "a synchronous step trains on rollouts of the current "
         "weights"),
    ):
        if getattr(hp, key) and hp.max_staleness == 0:
            raise _coupling(key, True, f"only applies with max_staleness >= 1 ({why})",
                            f"set max_staleness: 1, or remove {key}")
    if hp.max_staleness and hp.top_p != 1.0:
        raise _coupling(
            "top_p", hp.top_p,
            "must be 1.0 with max_staleness >= 1: the off-policy correction divides by the "
            "engine's recorded log-probs, which are those of the unfiltered distribution",
            "remove top_p (1.0), or set max_staleness: 0",
        )
