"""What a signal returns: training rows (pure data) and notes on each rollout.

A signal (``trainer/signals/table.py``, ``trainer/signals/ppo.py``) reads the step's scored
rollouts and writes nothing back onto them. It returns ``SignalRows``: the ``TrainingRow`` s to
train on (token ids, mask, advantages, log-probs: no reference to a rollout), the signal's metrics,
and per rollout ``RolloutNotes`` (the reward it trained with, its advantages per row and token).
The step (``StepRunner.learn``) records the notes on the rollouts once, for the step's metrics
and trajectories (``record_notes``).

Example:
    >>> from rltune.gateway.rows import TokenSequence
    >>> from rltune.rollout.results import RolloutResult
    >>> r = RolloutResult("r1", "s", 0, 0, ok=True, score=1.0, sequences=[
    ...     TokenSequence(input_ids=[1, 2, 3], loss_mask=[0, 1, 1], sampled_logprobs=[0, -1, -1])])
    >>> rows = training_rows([r], max_length=8)
    >>> rows[0].context, r.advantages
    (0, [])
    >>> notes = rollout_notes([r], [with_advantage(rows[0], [0.0, 0.5, 0.5])], {"r1": 1.0})
    >>> record_notes([r], notes); r.reward, r.advantage
    (1.0, 0.5)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.rollout.results import RolloutResult
from rltune.trainer.signals.advantages import overlong_penalty_B
from rltune.trainer.update import TrainingRow


@dataclass
class RolloutNotes:
    """What the signal made of one rollout: the reward it trained with (its score, shaped;
    None: it was not scored) and one advantage per token of each of its rows (0 where no
    training row covers the token)."""

    reward: Optional[float] = None
    advantages: list[list[float]] = field(default_factory=list)


@dataclass
class SignalRows:
    """A signal's answer for one step (see the module doc)."""

    rows: list[TrainingRow]
    metrics: dict[str, float] = field(default_factory=dict)
    notes: dict[str, RolloutNotes] = field(default_factory=dict)  # by rollout id


def training_rows(results: Sequence[RolloutResult], max_length: int) -> list[TrainingRow]:
    """One row per context of each given rollout, cut at ``max_length``, advantage 0;
    ``row.context`` is the index of the rollout's context (``RolloutResult.sequences``)."""
    rows: list[TrainingRow] = []
    for r in results:
        for i, seq in enumerate(r.sequences):
            mask = seq.loss_mask[:max_length]
            if sum(mask) == 0:
                continue
            rows.append(TrainingRow(
                input_ids=seq.input_ids[:max_length],
                loss_mask=mask,
                advantage=[0.0] * len(mask),
                rollout_id=r.rollout_id,
                rollout_logprobs=seq.sampled_logprobs[:max_length],
                context=i,
            ))
    return rows


def with_advantage(row: TrainingRow, values: list[float]) -> TrainingRow:
    """``row`` with its per-token advantages set (a new row; ``row`` is left as it is)."""
    return dataclasses.replace(row, advantage=list(values))


def shape_rewards(scored: Sequence[RolloutResult], hp: HyperParameters,
                  knobs: AlgorithmKnobs) -> list[float]:
    """Each scored rollout's reward: its score plus DAPO's overlong penalty when that is on."""
    rewards_B = torch.tensor([float(r.score or 0.0) for r in scored])
    if knobs.overlong_buffer_len > 0 and knobs.overlong_penalty_factor > 0:
        rewards_B = rewards_B + overlong_penalty_B(
            torch.tensor([float(r.response_tokens) for r in scored]),
            max_response_len=hp.max_length - hp.max_prompt_length,
            buffer_len=knobs.overlong_buffer_len,
            factor=knobs.overlong_penalty_factor,
        )
    return [float(v) for v in rewards_B.tolist()]


def rollout_notes(results: Sequence[RolloutResult], rows: Sequence[TrainingRow],
                  rewards: dict[str, float]) -> dict[str, RolloutNotes]:
    """The notes of each of ``results``: its reward from ``rewards`` (by rollout id) and its
    rows' advantages, laid over zeros for every token of every context."""
    notes = {r.rollout_id: RolloutNotes(rewards.get(r.rollout_id),
                                        [[0.0] * len(s.input_ids) for s in r.sequences])
             for r in results}
    for row in rows:
        notes[row.rollout_id].advantages[row.context][: len(row.advantage)] = row.advantage
    return notes


def record_notes(results: Sequence[RolloutResult], notes: dict[str, RolloutNotes]) -> None:
    """Record the signal's notes on the step's rollouts (their trajectories and metrics show
    the reward and advantages they trained with); rollouts without notes keep theirs."""
    for r in results:
        note = notes.get(r.rollout_id)
        if note is not None:
            r.reward, r.advantages = note.reward, note.advantages
