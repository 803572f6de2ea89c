"""Warm start: supervised training on synthetic calculator-agent transcripts.

Loss is on assistant tokens only (tool calls, final answers and their ``<|im_end|>``). Every
``eval_every`` steps the model plays sampled (T=1) multi-turn episodes on held-out questions
with the calculator really executed (:func:`rltune.models.agent.run_episodes`). The run is
fp32 throughout: bf16 autocast made the result depend on the CPU's ISA.

Two phases, each ended by held-out metrics, not by time:

* *copy*: ``tool_fraction`` of the transcripts use the tool, until the sampled tool path is
  right ``>= min_tool_accuracy`` of the time (over at least ``min_tool_episodes`` episodes
  that used it). With :func:`rltune.models.factory.copy_friendly_init` this takes ~150-480
  steps on every seed and CPU we measured, smoothly (RESULTS.md, robustness table).
* *mix*: the lower ``mix_tool_fraction`` share at ``mix_lr_scale`` of the rate, evaluated every
  ``mix_eval_every`` steps, until accuracy is in ``band`` with the tool path still reliable,
  within ``mix_max_steps`` of its own (measured: 10-30 steps). The copy phase's budget is
  ``max_steps``, so a copy that becomes reliable at its last evaluation still gets its mix
  phase (nano seed 1 under the ``sse`` ISA setting did exactly that at step 600).
  This moves the first-token decision "call the tool or answer", so the model is a reliable
  tool user that often does not use the tool: the decision RL learns in a few steps.

Without ``mix_tool_fraction`` there is one phase that stops in the band, or on overshoot.
A run that has not met its target within its budget reports ``reason="max_steps"`` and
``ok=False``; :func:`rltune.models.registry.ensure_demo_model` then fails loudly with the
metrics instead of saving the model.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rltune.models.agent import run_episodes, summarize
from rltune.models.chat_template import IM_END, IM_START, assistant_token_mask
from rltune.models.multistep import MultiStepConfig, make_multistep_rows, make_multistep_transcripts
from rltune.models.tasks import CALCULATOR_TOOL, TaskConfig, sample_tasks, task_to_row
from rltune.models.transcripts import make_transcripts

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

Progress = Callable[[dict[str, Any]], None]


@dataclass
class WarmStartConfig:
    """Knobs of one warm-start run (defaults: the ``nano`` recipe)."""

    seed: int = 0
    # A ``MultiStepConfig`` trains on multi-step chains (every transcript uses the tool, so
    # ``tool_fraction`` and ``guess_direct`` do not apply) and wants the single phase.
    task: TaskConfig | MultiStepConfig = field(
        default_factory=lambda: TaskConfig(digits=1, heldout_percent=30))
    tool_fraction: float = 0.8
    batch_size: int = 32
    lr: float = 1.5e-3
    warmup_steps: int = 30
    # After warm-up the rate falls linearly to this fraction of ``lr`` at ``max_steps`` (the
    # step budget, fixed by the recipe, not by the machine). 1.0 keeps it constant; a constant
    # rate left the copy noisy on some seeds (tool path 0.58 -> 0.34 between evaluations).
    final_lr_fraction: float = 0.1
    weight_decay: float = 0.01
    max_steps: int = 600
    eval_every: int = 25
    eval_episodes: int = 60
    band: tuple[float, float] = (0.2, 0.6)
    min_tool_accuracy: float = 0.9
    # The tool path counts as reliable only when enough evaluation episodes took it.
    min_tool_episodes: int = 20
    # Two phases when set: ``tool_fraction`` until the tool path is reliable, then this
    # (lower) tool share, evaluated every ``mix_eval_every`` steps, until the band.
    mix_tool_fraction: float | None = 0.35
    mix_eval_every: int = 10
    # The mix phase only has to move a bias; at the copy phase's rate it overshoots in a few
    # steps (measured: tool use 0.65 -> 0.03 in 10 steps at 2.5e-3) and unlearns the copy.
    mix_lr_scale: float = 0.2
    # The mix phase's own step budget, on top of the copy phase's ``max_steps``.
    mix_max_steps: int = 100
    # Direct transcripts answer with a plausible wrong number, so the tool is the only way to
    # a right answer and the model has no reason to memorise training questions.
    guess_direct: bool = True
    # Model calls per evaluation episode (a multi-step chain needs one per step, plus one).
    max_turns: int = 3
    threads: int | None = None  # None: auto_threads(); 0: leave torch's setting alone


@dataclass
class WarmStartResult:
    steps: int
    reason: str
    metrics: dict[str, float]
    history: list[dict[str, Any]]
    train_seconds: float
    threads: int

    @property
    def ok(self) -> bool:
        """Whether the run met its target (``reason == "in_band"``)."""
        return self.reason == "in_band"


def auto_threads(max_threads: int = 2) -> int:
    """Torch intra-op threads for a run on a possibly shared machine.

    Two processes with 2 threads each on 2 busy cores can be 20x slower than one thread
    each (the threads of a parallel region wait on each other while descheduled; measured
    here: 0.13 s/step alone, 3 s/step with a second 2-thread job). So: one thread unless the
    1-minute load average leaves a whole core free besides the one we will use.
    """
    import os

    cpus = os.cpu_count() or 1
    try:
        free = cpus - os.getloadavg()[0]
    except OSError:
        free = 1.0
    return max(1, min(max_threads, cpus, int(free)))


def encode_transcripts(
    tokenizer: PreTrainedTokenizerFast, convs: list[list[dict[str, Any]]]
) -> tuple[Any, Any, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 off assistant turns).

    The assistant span starts after ``<|im_start|>assistant\\n`` and ends with its
    ``<|im_end|>`` (included, so the model learns to stop).
    """
    import torch

    texts = [
        tokenizer.apply_chat_template(c, tools=[CALCULATOR_TOOL], tokenize=False) for c in convs
    ]
    ids_list = tokenizer(texts, add_special_tokens=False)["input_ids"]
    header = tokenizer.encode(IM_START + "assistant\n", add_special_tokens=False)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    width = max(len(x) for x in ids_list)
    input_ids = torch.full((len(ids_list), width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    for row, ids in enumerate(ids_list):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        mask = torch.tensor(assistant_token_mask(ids, header, im_end), dtype=torch.bool)
        labels[row, : len(ids)] = torch.where(mask, input_ids[row, : len(ids)], -100)
    return input_ids, attention, labels


def _loss_with_shared_prefix(model: Any, ids: Any, att: Any, labels: Any) -> Any:
    """Token-mean loss on ``labels``, computing the batch's common prefix only once.

    Every transcript starts with the same system + tools block (~150 of ~200 tokens), so its
    keys/values are computed once (batch 1, no grad: the block carries no loss, and its
    weights still learn through the other positions) and shared by the batch: ~3x less work.
    """
    import torch

    from rltune.engine.hf_compat import cache_kwargs, output_cache

    lengths = att.sum(dim=1)
    same = (ids == ids[:1]).all(dim=0).long()
    prefix = int(same.cumprod(0).sum().item())
    prefix = min(prefix, int(lengths.min().item()) - 1)
    if prefix < 16 or labels[:, :prefix].ne(-100).any():
        return model(input_ids=ids, attention_mask=att, labels=labels).loss
    with torch.no_grad():
        cache = output_cache(model(input_ids=ids[:1, :prefix], use_cache=True))
    cache.batch_repeat_interleave(ids.shape[0])
    return model(
        input_ids=ids[:, prefix:],
        attention_mask=att,
        **cache_kwargs(model, cache),
        labels=labels[:, prefix:],
        use_cache=False,
    ).loss


def warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    config: WarmStartConfig | None = None,
    progress: Progress | None = None,
    *,
    checkpoint: Checkpoint | None = None,
) -> WarmStartResult:
    """Train ``model`` in place until held-out sampled accuracy lands in ``config.band``.

    ``checkpoint``: the run starts from ``checkpoint.load()`` when that is not None, and
    saves its whole state there every ``checkpoint.every`` steps and after each evaluation,
    so a run resumed from any saved step ends with the same weights (same thread count).
    """
    import torch

    cfg = config or WarmStartConfig()
    threads_before = torch.get_num_threads()
    if cfg.threads != 0:
        torch.set_num_threads(cfg.threads or auto_threads())
    try:
        return _train(model, tokenizer, cfg, progress, checkpoint)
    finally:
        torch.set_num_threads(threads_before)


@dataclass
class LoopState:
    """Where a run stands between two steps: with the weights, the optimizer, the scheduler
    and the RNG states, all a resumed run needs. The training data is a function of the step
    (``make_transcripts(seed=cfg.seed * 1_000_003 + step)``), so ``step`` is also the data
    stream's position."""

    step: int = 0
    phase: str = "copy"
    mix_start: int = 0
    reason: str = "max_steps"
    loss_ema: float = float("nan")
    train_seconds: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)


class Checkpoint(Protocol):
    """Where a run saves its state and finds it again (``rltune.models.partial``)."""

    every: int  # save after every ``every`` steps, and after each evaluation

    def load(self) -> dict[str, Any] | None: ...

    def save(self, state: dict[str, Any]) -> None: ...


def _train(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    cfg: WarmStartConfig,
    progress: Progress | None,
    checkpoint: Checkpoint | None = None,
) -> WarmStartResult:
    import torch

    device = next(model.parameters()).device
    torch.manual_seed(cfg.seed)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=cfg.weight_decay
    )
    def lr_at(step: int) -> float:  # linear warm-up, then linear decay over the budget
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        frac = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
        return 1.0 - (1.0 - cfg.final_lr_fraction) * min(frac, 1.0)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    eval_rows = _eval_rows(cfg)
    st = LoopState(phase="single" if cfg.mix_tool_fraction is None else "copy")
    saved = checkpoint.load() if checkpoint else None
    if saved is not None:
        st = LoopState(**saved["loop"])
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        sched.load_state_dict(saved["scheduler"])
        torch.set_rng_state(saved["rng"]["torch"])
        random.setstate(saved["rng"]["python"])
        del saved

    def budget() -> int:  # the step by which the current phase must meet its target
        return st.mix_start + cfg.mix_max_steps if st.phase == "mix" else cfg.max_steps

    def snapshot() -> dict[str, Any]:
        return {
            "loop": asdict(st),
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
        }

    while st.reason == "max_steps" and st.step < budget():
        t0 = time.perf_counter()
        convs = _transcripts(cfg, st)
        ids, att, labels = (t.to(device) for t in encode_transcripts(tokenizer, convs))
        model.train()
        loss = _loss_with_shared_prefix(model, ids, att, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        st.step += 1
        st.train_seconds += time.perf_counter() - t0
        value = loss.item()
        st.loss_ema = value if math.isnan(st.loss_ema) else 0.9 * st.loss_ema + 0.1 * value
        event: dict[str, Any] = {
            "phase": "train",
            "step": st.step,
            "max_steps": budget(),
            "loss": st.loss_ema,
            "train_seconds": st.train_seconds,
            "curriculum": st.phase,
        }
        every = cfg.mix_eval_every if st.phase == "mix" else cfg.eval_every
        evaluated = st.step % every == 0 or st.step == budget()
        if evaluated:
            eps = run_episodes(model, tokenizer, eval_rows, temperature=1.0, seed=cfg.seed,
                               max_turns=cfg.max_turns)
            st.metrics = summarize(eps)
            event.update(phase="eval", **st.metrics)
            st.history.append(dict(event))
            _judge(st, cfg, len(eps), sched)
        if checkpoint and (evaluated or st.step % checkpoint.every == 0):
            checkpoint.save(snapshot())
        if progress:
            progress(event)
    model.eval()
    return WarmStartResult(
        steps=st.step,
        reason=st.reason,
        metrics=st.metrics,
        history=st.history,
        train_seconds=st.train_seconds,
        threads=torch.get_num_threads(),
    )


def _eval_rows(cfg: WarmStartConfig) -> list[dict[str, Any]]:
    if isinstance(cfg.task, MultiStepConfig):
        return make_multistep_rows(cfg.eval_episodes, "heldout", cfg.seed, cfg.task)
    tasks = sample_tasks(cfg.eval_episodes, "heldout", cfg.seed, cfg.task, unique=True)
    return [task_to_row(t) for t in tasks]


def _transcripts(cfg: WarmStartConfig, st: LoopState) -> list[list[dict[str, Any]]]:
    """The batch of step ``st.step`` (a function of the seed and the step only)."""
    seed = cfg.seed * 1_000_003 + st.step
    if isinstance(cfg.task, MultiStepConfig):
        return make_multistep_transcripts(cfg.batch_size, seed, cfg.task)
    return make_transcripts(
        cfg.batch_size,
        seed=seed,
        tool_fraction=cfg.mix_tool_fraction if st.phase == "mix" else cfg.tool_fraction,
        config=cfg.task,
        guess_direct=cfg.guess_direct,
    )


def _judge(st: LoopState, cfg: WarmStartConfig, episodes: int, sched: Any) -> None:
    """Apply an evaluation's ``st.metrics``: switch copy -> mix, or end the run."""
    lo, hi = cfg.band
    acc = st.metrics["accuracy"]
    in_range = lo <= acc <= hi
    tool_episodes = round(st.metrics["tool_rate"] * episodes)
    reliable = (
        st.metrics["tool_accuracy"] >= cfg.min_tool_accuracy
        and tool_episodes >= min(cfg.min_tool_episodes, episodes)
    )
    if st.phase == "copy":
        if reliable:  # the band does not end this phase: it waits for a sharp copy
            st.phase, st.mix_start = "mix", st.step
            sched.base_lrs = [lr * cfg.mix_lr_scale for lr in sched.base_lrs]
    elif st.phase == "mix":
        # the mix phase starts with the tool on most questions and works down; its
        # tool path is judged on fewer episodes, so only the accuracy bar applies
        if in_range and st.metrics["tool_accuracy"] >= cfg.min_tool_accuracy:
            st.reason = "in_band"
    elif in_range:
        st.reason = "in_band"
    elif acc > hi:
        st.reason = "overshoot"
