"""TRL half of ``trl_compare.py``: train with TRL's ``GRPOTrainer`` and record each step.

Run by ``trl_compare.py`` in its own process (``python _trl_side.py SPEC.json OUT.json``) so
that TRL's imports, threads and memory never touch the rltune run. SPEC is written by
``trl_compare.write_spec``; OUT gets the wall clock at each step end and TRL's logged metrics
per step.

Settings mirror rltune's ``algorithm: grpo`` with ``kl_loss_coef: 0`` as closely as TRL 1.16
allows (the differences are listed in ``trl_compare.py``'s docstring).
"""

from __future__ import annotations

import itertools
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def exact_reward_fn(completions: list[str], solution: list[str], **_: Any) -> list[float]:
    """Exact answer = 1, anything else (a wrong number, a tool call, no answer) = 0.

    The same rule as the calc template's ``CalcReward`` (``correct`` sub-score): numeric
    comparison of the last ``### ANSWER: <n> ###`` with the row's solution.
    """
    from rltune.models.tasks import is_correct

    return [float(is_correct(text, truth))
            for text, truth in zip(completions, solution, strict=True)]


def _time_calls(obj: Any, name: str) -> list[float]:
    """Wrap ``obj.name`` (an instance attribute shadows the method) and record each call's
    wall time: TRL's generation and reward phases, for the step breakdown."""
    seconds: list[float] = []
    method = getattr(obj, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - t0)

    setattr(obj, name, timed)
    return seconds


def step_clock() -> Any:
    """A ``TrainerCallback`` recording the wall clock at each optimizer-step end, and the
    metrics TRL logs for that step (``begin``, ``ends``, ``logs``)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        """Wall clock at each optimizer-step end, and the metrics TRL logs for that step."""

        def __init__(self) -> None:
            self.begin = 0.0
            self.ends: list[float] = []
            self.logs: list[dict[str, float]] = []

        def on_train_begin(self, args, state, control, **kw):
            self.begin = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.ends.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                self.logs.append({k: float(v) for k, v in logs.items()
                                  if isinstance(v, (int, float))})

    return StepClock()


def agentic_config(spec: dict[str, Any], out_dir: str, max_completion_length: int,
                   **extra: Any) -> Any:
    """The ``GRPOConfig`` both agentic TRL sides train with: ``agentic_compare.py``'s batch,
    lr and steps, fp32 on the CPU, β = 0, ε = 0.2, one iteration, a constant lr, gradient
    checkpointing off (as on rltune's side); ``extra`` adds the side's own settings."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out_dir, use_cpu=True, bf16=False, seed=spec["seed"],
        per_device_train_batch_size=spec["batch_size"] * spec["n_rollouts"],
        gradient_accumulation_steps=1, num_generations=spec["n_rollouts"],
        max_completion_length=max_completion_length, temperature=1.0, top_p=1.0,
        top_k=0, learning_rate=spec["learning_rate"], lr_scheduler_type="constant",
        warmup_steps=0, max_grad_norm=1.0, beta=0.0, epsilon=0.2,
        num_iterations=1, max_steps=spec["steps"], logging_steps=1, save_strategy="no",
        report_to="none", disable_tqdm=True, dataloader_num_workers=0,
        gradient_checkpointing=False, **extra)


def agentic_result(clock: Any, spec: dict[str, Any], train_s: float, generate_s: Any,
                   outside: Any = None, **extra: Any) -> dict[str, Any]:
    """The TRL side's answer to ``agentic_compare.py`` from its ``step_clock``: seconds per
    step (the gaps between step ends, the first from the start of training, less the seconds
    ``outside[i]`` of step i's gap that were not the step: a validation), episodes per second,
    the logged rewards and this process's peak RSS; ``extra`` adds task fields."""
    ends = [clock.begin, *clock.ends]
    step_s = [b - a for a, b in itertools.pairwise(ends)]
    if outside:
        step_s = [s - o for s, o in zip(step_s, outside, strict=False)] + step_s[len(outside):]
    episodes = len(step_s) * spec["batch_size"] * spec["n_rollouts"]
    return {"side": "trl", "seconds_per_step": sum(step_s) / max(len(step_s), 1),
            "step_seconds": step_s, "train_s": train_s, "generate_s": generate_s,
            "episodes_per_s": episodes / max(sum(step_s), 1e-9),
            "rewards": [log["reward"] for log in clock.logs], "logs": clock.logs, **extra,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(spec["threads"])
    t_import = time.perf_counter()
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    from trl import GRPOConfig, GRPOTrainer

    from rltune.models import load_tokenizer

    import_s = time.perf_counter() - t_import
    hf_logging.set_verbosity_error()
    torch.manual_seed(spec["seed"])

    tok = load_tokenizer(spec["model_dir"])
    rows = [json.loads(line) for line in Path(spec["train_file"]).read_text().splitlines()]
    # TRL would render conversational prompts itself, but it passes its own ``tools`` (None
    # here: giving TRL tools switches on its multi-turn tool loop) to the chat template, so the
    # calculator schema would be missing from the prompt. Rendering the prompt text here with
    # the same template and tools the rltune gateway uses gives both sides the same prompt ids
    # (checked by ``trl_compare.py``); TRL then tokenizes plain text.
    prompts = [
        tok.apply_chat_template(r["messages"], tools=r.get("tools"), tokenize=False,
                                add_generation_prompt=True)
        for r in rows
    ]
    dataset = Dataset.from_dict(
        {"prompt": prompts, "solution": [r["rollout_extra"]["solution"] for r in rows]}
    )
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype=torch.float32)

    clock = step_clock()
    with tempfile.TemporaryDirectory(prefix="trl-compare-") as out_dir:
        config = GRPOConfig(
            output_dir=out_dir,
            use_cpu=True,
            bf16=False,
            seed=spec["seed"],
            per_device_train_batch_size=spec["batch_size"] * spec["n_rollouts"],
            gradient_accumulation_steps=1,
            num_generations=spec["n_rollouts"],
            max_completion_length=spec["max_new_tokens"],
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            learning_rate=spec["learning_rate"],
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=spec["weight_decay"],
            max_grad_norm=1.0,
            beta=0.0,
            loss_type="grpo",  # per-sequence token mean, then mean: rltune's seq-mean-token-mean
            epsilon=0.2,
            scale_rewards="group",
            num_iterations=1,
            max_steps=spec["steps"],
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
            # TRL turns gradient checkpointing on by default (a memory saving for big models);
            # on a tiny model it only adds a forward pass, and rltune does not checkpoint.
            gradient_checkpointing=spec.get("trl_gradient_checkpointing", False),
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=exact_reward_fn,
            args=config,
            train_dataset=dataset,
            processing_class=tok,
            callbacks=[clock],
        )
        generate_s = _time_calls(trainer, "_generate")
        reward_s = _time_calls(trainer, "_calculate_rewards")
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
    return {
        "side": "trl",
        "threads": torch.get_num_threads(),
        "import_s": import_s,
        "train_s": train_s,
        "begin": clock.begin,
        "step_ends": clock.ends,
        "rewards": [log["reward"] for log in clock.logs],
        "generate_s": generate_s,
        "reward_s": reward_s,
        "completion_length": [log.get("completions/mean_length", float("nan"))
                              for log in clock.logs],
        "logs": clock.logs,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(spec)))


if __name__ == "__main__":
    main()
