"""Everything a training job runs while it trains: engine, gateway, policy, pools, rewards.

``TrainingRuntime`` is an async context manager: entering loads the model twice (an engine
copy that samples and the policy that trains), starts the policy gateway on 127.0.0.1 and the
function pools; leaving stops them all, even after an error.

Full fine-tuning (``lora_rank: 0``) loads a third, frozen copy as the KL reference when the
KL term is on. With ``lora_rank > 0`` the policy is wrapped with LoRA adapters and is its own
reference (adapters disabled); the engine then gets the merged weights (``trainer/lora.py``).

On-policy distillation (``training.type: pg_opd``) also loads the frozen teacher
(``trainer/teacher.py``); ``distillation_rows`` turns rollouts into per-token advantages.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rltune.config import JobConfig
from rltune.config.data import EpochSampler
from rltune.config.datasets import TrainingType
from rltune.sdk.data import FunctionType
from rltune.sdk.errors import ConfigError
from rltune.trainer import opd_reward
from rltune.trainer.advantages import group_advantages_B, opd_advantages_BT, overlong_penalty_B
from rltune.trainer.checkpoint import list_checkpoints, restore_training_state, save_checkpoint
from rltune.trainer.lora import engine_weights, is_lora, load_adapter, wrap_with_lora
from rltune.trainer.rewarding import RewardComponent, Rewarder
from rltune.trainer.rollouts import BuiltinRollout, RolloutResult, RolloutRunner
from rltune.trainer.teacher import Teacher
from rltune.trainer.update import PolicyUpdater, TrainingRow


def resolve_model_path(name: str) -> Path:
    """A model directory from a path, a name under ``$RLTUNE_HOME/models``, or a demo size."""
    if name and (Path(name).expanduser() / "config.json").is_file():
        return Path(name).expanduser().resolve()
    from rltune.models import resolve_model

    return Path(resolve_model(name))


def component_spec(comp: Any, func_type: FunctionType, base_dir: Path) -> Any:
    """The function pool's spec for one configured component."""
    from rltune.functions.spec import FunctionComponentSpec

    fc = comp.fcmodel
    if not fc or not fc.classpath:
        raise ConfigError(
            f"function {comp.name!r} has no fcmodel.classpath",
            where=f"functions[{comp.name}]",
            hint="set fcmodel.classpath, e.g. functions/reward.py:MyReward",
        )
    return FunctionComponentSpec(
        classpath=fc.classpath,
        func_type=func_type,
        workspace=(base_dir / (fc.zipdir or ".")).resolve(),
        name=comp.name,
        timeout=comp.timeout,
        runtime=comp.runtime or {},  # the spec takes the job config's runtime model as is
        build_venv="auto",  # a job installs requirements.txt lines this env lacks
    )


class TrainingRuntime:
    def __init__(
        self,
        config: JobConfig,
        *,
        job_dir: Path,
        base_dir: Path,
        job_id: str,
        total_steps: int,
        log: Callable[..., None],
    ):
        self.config, self.base_dir, self.job_id = config, base_dir, job_id
        self.hp, self.knobs = config.hyper_parameters, config.knobs
        self.total_steps = total_steps
        self.log = log
        self.model_path = resolve_model_path(config.model.name or "")
        self.ckpt_root = Path(job_dir) / "checkpoints"
        self._closers: list[Any] = []

    async def __aenter__(self) -> TrainingRuntime:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start(self) -> None:
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        from rltune.gateway.toolcalls import parser_name_for_model_dir

        # before any weights load: an unknown model family or parser name fails here
        parser = parser_name_for_model_dir(self.model_path, self.config.model.tool_call_parser)

        from rltune.engine.transformers_engine import TransformersEngine
        from rltune.functions.pool import FunctionPool
        from rltune.gateway.server import Gateway

        hp = self.hp
        hf_logging.disable_progress_bar()  # per-load tqdm bars drown the job's own progress
        torch.manual_seed(hp.seed)
        threads = int(os.environ.get("RLTUNE_TORCH_THREADS", "2"))
        self.engine = TransformersEngine.from_pretrained(
            self.model_path,
            threads=threads,
            model_name=self.config.model.name or "policy",
            max_batch_size=max(8, hp.batch_size * hp.n_rollouts),
        )
        self._closers.append(self.engine.close)
        self.tokenizer = self.engine.tokenizer
        self.teacher = None
        if self.config.training.type is TrainingType.PG_OPD:
            # Loaded before the rest starts: a teacher with another tokenizer fails fast.
            teacher = self.config.teacher_model or ""
            teacher_path = resolve_model_path(teacher)
            self.teacher = Teacher.load(
                teacher_path,
                student_tokenizer=self.tokenizer,
                student_name=self.config.model.name or str(self.model_path),
                teacher_name=teacher,
                temperature=hp.temperature,
                micro_batch_size=hp.micro_batch_size,
                pad_token_id=self.tokenizer.pad_token_id or 0,
                bf16=hp.bf16,
            )
            self.log(f"teacher model {teacher_path} (frozen, fp32) for on-policy distillation")
        self.gateway = await Gateway.start(self.engine, tool_parser=parser)
        self._closers.append(self.gateway.stop)
        self.log(f"policy gateway at {self.gateway.base_url}, model {self.model_path}, "
                 f"tool-call parser {parser}")

        self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
        reference = None
        if hp.lora_rank > 0:
            self.model = wrap_with_lora(self.model, hp)
            trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
            self.log(f"LoRA rank {hp.lora_rank}, alpha {hp.lora_scale_alpha:g}: "
                     f"{trainable} trainable parameters; reference = adapters disabled")
        elif self.knobs.use_kl_loss and self.knobs.kl_loss_coef > 0:
            reference = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
            reference.eval().requires_grad_(False)
        self.updater = PolicyUpdater(
            self.model,
            hp,
            self.knobs,
            total_steps=max(1, self.total_steps),
            reference_model=reference,
            pad_token_id=self.tokenizer.pad_token_id or 0,
        )

        async def start_pool(comp: Any, ftype: FunctionType) -> Any:
            pool = await FunctionPool.start(component_spec(comp, ftype, self.base_dir))
            self._closers.append(pool.close)
            self.log(f"started {ftype.value} function {comp.name} ({comp.fcmodel.classpath})")
            return pool

        rollout = self.config.rollout
        if rollout is not None:
            caller: Any = await start_pool(rollout, FunctionType.ROLLOUT)
        else:
            caller = BuiltinRollout()
            self._closers.append(caller.close)
            self.log("no rollout function configured: using the built-in single-turn rollout")
        components = []
        for comp in self.config.rewards:
            components.append(
                RewardComponent(
                    name=comp.name,
                    pool=await start_pool(comp, FunctionType.REWARD),
                    weight=1.0 if comp.weight is None else comp.weight,
                    metric_weights=comp.reward_metric_weight,
                )
            )
        for comp in self.config.group_rewards:
            components.append(
                RewardComponent(
                    name=comp.name,
                    pool=await start_pool(comp, FunctionType.GROUP_REWARD),
                    group=True,
                    weight=1.0 if comp.weight is None else comp.weight,
                    metric_weights=comp.reward_metric_weight,
                )
            )
        self.rewarder = Rewarder(components, job_id=self.job_id, max_retries=hp.max_rollout_retries)
        sampling = {
            "temperature": hp.temperature,
            "top_p": hp.top_p,
            "max_tokens": hp.max_length - hp.max_prompt_length,
        }
        # One runner serves training and validation: same caller, gateway and sampling.
        self.runner = RolloutRunner(
            caller,
            self.gateway,
            job_id=self.job_id,
            model_name=self.gateway.model_name,
            sampling_params=sampling,
            max_retries=hp.max_rollout_retries,
        )

    async def __aexit__(self, *exc: Any) -> None:
        while self._closers:
            close = self._closers.pop()
            try:
                await close()
            except Exception as err:  # keep closing the rest
                self.log(f"error while shutting down: {err}", level="WARNING")

    # ------------------------------------------------------------------ training rows

    def assign_advantages(self, results: list[RolloutResult]) -> list[TrainingRow]:
        """Shape rewards, compute group advantages, and return the rows to train on."""
        hp, knobs = self.hp, self.knobs
        scored = [r for r in results if r.scored and r.reward_error is None]
        if not scored:
            return []
        rewards_B = torch.tensor([float(r.reward) for r in scored])
        if knobs.overlong_buffer_len > 0 and knobs.overlong_penalty_factor > 0:
            lengths_B = torch.tensor([float(r.response_tokens) for r in scored])
            rewards_B = rewards_B + overlong_penalty_B(
                lengths_B,
                max_response_len=hp.max_length - hp.max_prompt_length,
                buffer_len=knobs.overlong_buffer_len,
                factor=knobs.overlong_penalty_factor,
            )
            for r, value in zip(scored, rewards_B.tolist(), strict=True):
                r.reward = value
        groups_B = torch.tensor([r.sample_index for r in scored])
        adv_B = group_advantages_B(rewards_B, groups_B, norm_by_std=knobs.norm_adv_by_std)
        rows: list[TrainingRow] = []
        if not any(adv_B.tolist()):
            for r in scored:
                r.advantage = 0.0
            return rows  # no rollout carries a signal: an update would only replay momentum
        for r, adv in zip(scored, adv_B.tolist(), strict=True):
            r.advantage = adv
            # Zero-advantage rollouts stay in: they add no policy gradient but count in the
            # loss's normaliser. Dropping them made the gradient scale with the share of
            # flat groups, so a step with little signal weighed as much as a rich one.
            for row in r.rows:
                ids = row.input_ids[: hp.max_length]
                mask = row.loss_mask[: hp.max_length]
                if sum(mask) == 0:
                    continue
                rows.append(
                    TrainingRow(
                        input_ids=ids,
                        loss_mask=mask,
                        advantage=adv,
                        rollout_id=r.rollout_id,
                        rollout_logprobs=row.sampled_logprobs[: hp.max_length],
                    )
                )
        return rows

    def distillation_rows(self, results: list[RolloutResult]) -> tuple[list[TrainingRow], float]:
        """OPD: rows whose per-token advantage is ``-(log pi_old - log pi_teacher)`` on the
        sampled tokens, and the mean of ``log pi_old - log pi_teacher`` over those tokens (a
        sample estimate of the reverse KL to the teacher, before the update).

        Every rollout that produced tokens trains; with reward functions each token also gets
        ``opd_reward_weight`` x its rollout's group reward advantage (``trainer/opd_reward.py``).
        """
        rows: list[TrainingRow] = []
        owner: list[RolloutResult] = []
        for r in results:
            if not r.ok:
                continue
            for row in r.rows:
                mask = row.loss_mask[: self.hp.max_length]
                if sum(mask) == 0:
                    continue
                rows.append(TrainingRow(
                    input_ids=row.input_ids[: self.hp.max_length],
                    loss_mask=mask,
                    advantage=0.0,  # set below, per token
                    rollout_id=r.rollout_id,
                    rollout_logprobs=row.sampled_logprobs[: self.hp.max_length],
                ))
                owner.append(r)
        if not rows or self.teacher is None:
            return rows, float("nan")
        # The student's old log-probs are computed here (the updater then reuses them).
        student = self.updater.compute_logprobs(rows)
        teacher = self.teacher.logprobs([row.input_ids for row in rows])
        # Per rollout: [sum of token advantages, sampled tokens].
        totals: dict[str, list[float]] = {}
        reward_adv = opd_reward.reward_advantages(  # teacher + reward: both signals train
            results, weight=self.hp.opd_reward_weight if self.hp.opd_reward_weight is not None
            else opd_reward.DEFAULT_WEIGHT, norm_by_std=self.knobs.norm_adv_by_std,
        ) if self.rewarder.components else {}
        for row, r, old, ref in zip(rows, owner, student, teacher, strict=True):
            mask = torch.tensor(row.loss_mask, dtype=torch.float32)
            adv = opd_advantages_BT(torch.tensor(old), torch.tensor(ref), mask)
            adv = adv + reward_adv.get(r.rollout_id, 0.0) * mask
            row.old_logprobs, row.advantage = old, adv.tolist()
            total = totals.setdefault(r.rollout_id, [0.0, 0.0])
            total[0] += float(adv.sum())
            total[1] += float(mask.sum())
        for r in owner:  # the trajectory record shows the rollout's mean token advantage
            adv_sum, n = totals[r.rollout_id]
            r.advantage = adv_sum / n
        adv_sum = sum(t[0] for t in totals.values())
        tokens = sum(t[1] for t in totals.values())
        return rows, -adv_sum / tokens

    async def sync_weights(self) -> None:
        # The engine holds a plain HF model: a LoRA policy sends its merged weights.
        await self.engine.update_weights(engine_weights(self.model))

    def trajectory(self, r: RolloutResult) -> dict[str, Any]:
        """The stored record of one rollout (what the console replays)."""
        out = r.agent_output
        return {
            "rollout_id": r.rollout_id,
            "sample_id": r.sample_id,
            "sample_index": r.sample_index,
            "row_index": r.row_index,
            "status": "success" if r.ok and r.reward_error is None else "failed",
            "error": r.error or r.reward_error,
            "attempts": r.attempts,
            "messages": out.messages if out else None,
            "rollout_metrics": out.rollout_metrics if out else None,
            "reward": r.reward,
            "rewards": r.component_scores,
            "reward_metrics": r.component_metrics,
            "advantage": r.advantage,
            "num_llm_calls": r.num_calls,
            "response_tokens": r.response_tokens,
            "prompt_tokens": r.rows[0].prompt_length if r.rows else 0,
            "template_rewrites": r.template_rewrites,
            "latency_s": round(r.latency_s, 4),
            "tokens": [
                {
                    "input_ids": row.input_ids,
                    "loss_mask": row.loss_mask,
                    "logprobs": [round(x, 4) for x in row.sampled_logprobs],
                }
                for row in r.rows
            ],
        }

    # ------------------------------------------------------------------ checkpoints

    def save(self, step: int, sampler: EpochSampler, trainer_state: dict[str, Any]) -> Path:
        state = {**trainer_state, "data_order": sampler.state_dict()}
        return save_checkpoint(
            self.ckpt_root,
            step=step,
            model=self.model,
            tokenizer=self.tokenizer,
            updater=self.updater,
            trainer_state=state,
            save_total_limit=self.hp.save_total_limit,
        )

    async def restore(self, path: str | Path, sampler: EpochSampler) -> int:
        """Load a checkpoint's weights and state into policy and engine; returns its step."""
        from transformers import AutoModelForCausalLM

        path = Path(path)
        if is_lora(self.model):
            # The base stays the job's original model (it is the KL reference); only the
            # adapters continue, exactly as saved (not re-derived from the merged weights).
            load_adapter(self.model, path)
        else:
            loaded = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            self.model.load_state_dict(loaded.state_dict())
        state = restore_training_state(path, self.updater)
        sampler.load_state_dict(state["data_order"])
        await self.sync_weights()
        return int(state["step"])

    def checkpoints(self) -> list[Path]:
        return list_checkpoints(self.ckpt_root)
