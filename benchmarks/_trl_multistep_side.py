"""TRL half of ``agentic_compare.py --task multistep``: ``GRPOTrainer`` with its own tool loop.

``python _trl_multistep_side.py SPEC.json OUT.json`` (run by ``agentic_compare.py`` in its own
process). **TRL's ``tools=`` loop, not a ``rollout_func``**: TRL 1.16's ``_tool_call_loop``
runs a turn's tool calls and generates again for every rollout whose last turn called a tool,
until none does or ``max_tool_calling_iterations`` rounds have run, so each of a chain's
dependent calls sees the previous result, which is all this agent does (set to 4 rounds: with
the first turn the template's ``MAX_TURNS`` = 5 model calls, as in rltune's rollout). The
multi-hop agent needed a ``rollout_func`` because its hops are forced by the agent; here the
model decides. As in the calc task, TRL runs a round's tool calls one rollout after another
(async tools are gathered only within one rollout), against the same HTTP calculator
(``_trl_agentic_side.http_calculator``).

Same model, rows (``_multistep_bench.multistep_rows``), tool schema, reward (the template's
``MultiStepReward`` itself: exact answer + 0.5 x the share of calls right, scored through the
rltune SDK as its function worker would), batch 8 x 8, lr, steps, GSPO-like clipping, no KL.
Lengths as the template's: each model call writes at most ``max_length - max_prompt_length``
(64) tokens (``generation_kwargs``) and the episode stays within ``max_length`` (TRL's
``max_completion_length`` = ``max_length`` less the longest prompt).

Validation (``Validation``): before training and every ``eval_steps`` (and at the last step)
the held-out rows x ``val_n_rollouts`` go through TRL's own generation (``_generate``: the same
tool loop, one batch) and the template's reward in its validation phase (the exact answer). It
runs in the step's ``on_step_end``, inside the side's wall clock, as rltune's validation is in
rltune's; it is taken out of the seconds per step (``agentic_result``'s ``outside``).

Tokens (training only): every model call's context is what ``generate`` prefills (TRL keeps
no KV cache between calls; its left padding, computed too, is not counted); the tokens an
episode added are its completion ids (sampled + tool results and template glue).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _multistep_bench import multistep_rows  # noqa: E402
from _trl_agentic_side import http_calculator, tool_tokenizer  # noqa: E402
from _trl_side import _time_calls, agentic_config, agentic_result, step_clock  # noqa: E402


def template_scorer():
    """``score(completions, solutions, steps, validation)``: the template reward's outputs."""
    from rltune.sdk import AgentOutput, RewardInput
    from rltune.sdk.data import RequestMetadata, validation_sample_id
    from rltune.sdk.processors import call_process
    from rltune.templates.multistep.functions.reward import MultiStepReward

    reward = MultiStepReward()

    async def one(i: int, messages: list, solution: str, steps: list, validation: bool):
        meta = RequestMetadata(job_id="trl", sample_id=validation_sample_id("trl", i),
                               rollout_id=str(i), attempt_id="0") if validation else None
        out = AgentOutput(messages=messages, rollout_extra={"solution": solution, "steps": steps})
        data = RewardInput(ground_truth=solution, request_metadata=meta, agent_output=out)
        return (await call_process(reward, data)).reward

    async def score(completions: list, solutions: list, steps: list, validation: bool) -> list:
        return await asyncio.gather(*(one(i, c, s, v, validation) for i, (c, s, v) in
                                      enumerate(zip(completions, solutions, steps, strict=True))))

    return score


class TokenMeter:
    """What TRL's generation prefilled and what its episodes added (``paused``: validation)."""

    def __init__(self) -> None:
        self.paused = False
        self.prefill = 0
        self.prompts: list[int] = []
        self.added: list[int] = []
        self.sampled: list[int] = []

    def attach(self, trainer: Any) -> None:
        single, generate = trainer._generate_single_turn, trainer._generate

        def counted(prompt_ids: list, *args: Any, **kwargs: Any) -> Any:
            if not self.paused:
                self.prefill += sum(len(ids) for ids in prompt_ids)
            return single(prompt_ids, *args, **kwargs)

        def recorded(prompts: list) -> Any:
            out = generate(prompts)
            prompt_ids, completion_ids, tool_mask = out[0], out[1], out[2]
            for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
                self.prompts.append(len(p))
                self.added.append(len(c))
                self.sampled.append(sum(tool_mask[i]) if tool_mask is not None else len(c))
            return out

        trainer._generate_single_turn = counted
        trainer._generate = recorded

    def result(self) -> dict[str, Any]:
        if not self.added:
            return {"episodes_logged": 0}
        mean, n = statistics.mean, len(self.added)
        prefill = round(self.prefill / n, 1)
        return {"episodes_logged": n, "prompt_per_episode": round(mean(self.prompts), 1),
                "added_per_episode": round(mean(self.added), 1),
                "sampled_per_episode": round(mean(self.sampled), 1),
                "engine_prompt_per_episode": prefill, "prefill_per_episode": prefill,
                "prefill_per_added": round(prefill / max(mean(self.added), 1e-9), 3)}


def _tools_for(trainer: Any, n: int) -> tuple[Any, Any]:
    """Give ``n`` rollouts TRL's per-rollout tool tables (built per training batch in
    ``_generate_and_score_completions``, sized to it); returns the batch's, to put back."""
    saved = (getattr(trainer, "_sync_tool_dicts", None),
             getattr(trainer, "_async_tool_dicts", None))
    sync, coros = {}, {}
    for tool in trainer._standalone_tools:
        (coros if inspect.iscoroutinefunction(tool) else sync)[tool.__name__] = tool
    trainer._sync_tool_dicts, trainer._async_tool_dicts = [sync] * n, [coros] * n
    return saved


def validation_callback(rows: list[dict], n: int, every: int, last: int, score: Any,
                        meter: TokenMeter) -> Any:
    """A ``TrainerCallback`` validating on ``rows`` (``n`` samples each) before training and at
    every ``every``-th step and the ``last``; set its ``trainer`` before training."""
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    class Validation(TrainerCallback):
        def __init__(self) -> None:
            self.trainer: Any = None
            self.values: list[tuple[int, float]] = []
            self.seconds: dict[int, float] = {}
            self.prompts = [r["messages"] for r in rows for _ in range(n)]
            self.solutions = [r["rollout_extra"]["solution"] for r in rows for _ in range(n)]
            self.steps = [r["rollout_extra"]["steps"] for r in rows for _ in range(n)]

        def on_train_begin(self, args, state, control, **kw):
            self.validate(0)

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % every == 0 or state.global_step == last:
                self.validate(state.global_step)

        def validate(self, step: int) -> None:
            t0 = time.perf_counter()
            trainer = self.trainer
            was_training = trainer.model.training
            trainer.model.eval()
            meter.paused = True
            saved = _tools_for(trainer, len(self.prompts))
            try:  # the class's _generate: not the step's timed and recorded one
                completions = GRPOTrainer._generate(trainer, self.prompts)[3]
            finally:
                meter.paused = False
                trainer._sync_tool_dicts, trainer._async_tool_dicts = saved
                trainer.model.train(was_training)
            rewards = asyncio.run(score(completions, self.solutions, self.steps, True))
            trainer._metrics["eval"].clear()  # generation's own metrics: not logged
            self.values.append((step, statistics.mean(r.reward_score for r in rewards)))
            self.seconds[step] = time.perf_counter() - t0

    return Validation()


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    from rltune.models.tasks import CALCULATOR_TOOL
    from rltune.templates.multistep.functions.rollout import MAX_TURNS

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    torch.manual_seed(spec["seed"])
    calculator = http_calculator(spec["tool_url"])
    score = template_scorer()
    train, val = multistep_rows(spec["steps"], spec["batch_size"], spec["val_rows"])
    dataset = Dataset.from_dict({"prompt": [r["messages"] for r in train],
                                 "solution": [r["rollout_extra"]["solution"] for r in train],
                                 "steps": [r["rollout_extra"]["steps"] for r in train]})
    parts: dict[str, list[float]] = {"correct": [], "steps_right": []}

    async def multistep_reward(completions: list, solution: list, steps: list,
                               **_: Any) -> list[float]:
        rewards = await score(completions, solution, steps, False)
        for key in parts:
            parts[key].append(statistics.mean(r.reward_metrics[key] for r in rewards))
        return [r.reward_score for r in rewards]

    tok = tool_tokenizer(spec["model"])
    longest = max(len(tok.encode(tok.apply_chat_template(
        r["messages"], tools=[CALCULATOR_TOOL], tokenize=False, add_generation_prompt=True),
        add_special_tokens=False)) for r in train + val)
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)
    meter = TokenMeter()
    validation = validation_callback(val, spec["val_n_rollouts"], spec["eval_steps"],
                                     spec["steps"], score, meter)
    clock = step_clock()  # after the validation: a step's end is taken after its validation
    with tempfile.TemporaryDirectory(prefix="trl-multistep-") as out_dir:
        config = agentic_config(spec, out_dir, spec["max_length"] - longest,
                                max_tool_calling_iterations=MAX_TURNS - 1,
                                generation_kwargs={"max_new_tokens": spec["max_new_tokens"]})
        trainer = GRPOTrainer(model=model, reward_funcs=multistep_reward, args=config,
                              train_dataset=dataset, processing_class=tok, tools=[calculator],
                              callbacks=[validation, clock])
        validation.trainer = trainer
        generate_s = _time_calls(trainer, "_generate")
        meter.attach(trainer)
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
    val_s = [validation.seconds.get(step, 0.0) for step in range(1, len(clock.ends) + 1)]
    curve = [(step, 0.0 if step == 0 else round(clock.ends[step - 1] - clock.begin, 2), value)
             for step, value in validation.values]
    return agentic_result(clock, spec, train_s, generate_s, outside=val_s, curve=curve,
                          initial=validation.values[0][1], reward_parts=parts,
                          validation_s=validation.seconds, tokens=meter.result(),
                          max_completion_length=spec["max_length"] - longest)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(spec)))


if __name__ == "__main__":
    main()
