"""What one rollout produced, from its tokens to its advantage, and the record that is stored.

``RolloutResult`` is filled in three stages: the rollout runner (``ok``, ``sequences``, ``error``),
the reward stage (``score``: the raw weighted sum of the reward functions, or
``reward_error``) and the training step, which records its signal's notes once
(``trainer/rows.py``; ``reward``: the score after shaping, e.g. DAPO's overlong penalty;
``advantages``: one value per token of each row). ``usable`` is the one
test of "this rollout has a score to learn from"; ``has_signal`` the one test of "this prompt's
group carries a learning signal" (two usable rollouts whose rewards differ by more than
``SIGNAL_TOLERANCE``), used by dynamic sampling, the step's metrics, the signal and the
``rltune test-functions`` learnability alike.

Example:
    >>> a = RolloutResult("r1", "s", 0, 0, ok=True, score=1.0)
    >>> b = RolloutResult("r2", "s", 0, 0, ok=True, score=0.0)
    >>> a.usable, has_signal([a, b]), has_signal([a])
    (True, True, False)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from rltune.gateway.rows import TokenSequence
from rltune.sdk.data import AgentOutput


@dataclass
class RolloutResult:
    """Everything the step needs to know about one rollout (after its retries)."""

    rollout_id: str
    sample_id: str
    sample_index: int  # index of the prompt in the step (the GRPO group)
    row_index: int  # index of the prompt in the dataset
    ok: bool
    agent_output: Optional[AgentOutput] = None
    sequences: list[TokenSequence] = field(default_factory=list)  # the captured tokens
    num_calls: int = 0
    template_rewrites: int = 0
    attempts: int = 1
    error: Optional[str] = None
    #: Why each failed attempt failed, in order (a rollout that succeeded on its second
    #: attempt keeps its first attempt's reason here; ``error`` is only the final outcome's).
    attempt_errors: list[str] = field(default_factory=list)
    #: ``error_code`` of the failed call (rollout's last attempt, or a reward's), e.g.
    #: ``FAILURE_ERROR_CODE`` for an Ark plugin's FAILURE.
    error_code: Optional[str] = None
    latency_s: float = 0.0
    #: Seconds the successful attempt waited for the policy model (its calls' latencies).
    model_latency_s: float = 0.0
    traceparent: Optional[str] = None  # the rollout span, parent of its reward spans
    # filled by the reward stage
    score: Optional[float] = None
    component_scores: dict[str, float] = field(default_factory=dict)
    component_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    reward_error: Optional[str] = None
    #: Seconds scoring the rollout's group (its reward functions run concurrently).
    reward_latency_s: float = 0.0
    #: The rollout or a reward asked to drop this prompt's group (``is_discard``).
    discarded: bool = False
    # recorded by the training step from its signal's notes (trainer/rows.py)
    reward: Optional[float] = None
    advantages: list[list[float]] = field(default_factory=list)  # per row, per token

    @property
    def usable(self) -> bool:
        """The rollout ran and its reward functions gave it a finite score."""
        return self.ok and self.score is not None and self.reward_error is None

    @property
    def response_tokens(self) -> int:
        return sum(r.num_sampled for r in self.sequences)

    @property
    def advantage(self) -> float:
        """Mean advantage over the rollout's sampled tokens (0 when it did not train)."""
        total = n = 0.0
        for row, adv in zip(self.sequences, self.advantages, strict=False):
            for m, a in zip(row.loss_mask, adv, strict=False):
                total, n = total + m * a, n + m
        return total / n if n else 0.0

    @property
    def failure(self) -> Optional[str]:
        """Why the rollout cannot be learned from by reward (None when ``usable``)."""
        return self.error or self.reward_error if not self.usable else None


#: Rewards closer than this count as equal: a group whose usable rewards all lie within it
#: carries no learning signal (its advantages are all 0).
SIGNAL_TOLERANCE = 1e-8


def final_reward(r: RolloutResult) -> float:
    """The reward a usable rollout trains with: the shaped ``reward`` once the signal set it,
    else the raw ``score``."""
    return float(r.reward if r.reward is not None else r.score)  # type: ignore[arg-type]


def has_signal(group: Sequence[RolloutResult],
               rewards: Optional[Mapping[str, float]] = None) -> bool:
    """Whether a prompt's group carries a reward signal: two usable rollouts whose rewards
    differ by more than ``SIGNAL_TOLERANCE`` (``rewards``: the shaped rewards by rollout id,
    before they are recorded on the rollouts; else ``final_reward``)."""
    values = [rewards[r.rollout_id] if rewards and r.rollout_id in rewards else final_reward(r)
              for r in group if r.usable]
    return len(values) >= 2 and max(values) - min(values) > SIGNAL_TOLERANCE


def by_prompt(results: Sequence[RolloutResult]) -> list[list[RolloutResult]]:
    """The rollouts grouped by prompt (``sample_index``), in first-seen order."""
    groups: dict[int, list[RolloutResult]] = defaultdict(list)
    for r in results:
        groups[r.sample_index].append(r)
    return list(groups.values())


def trajectory_record(r: RolloutResult) -> dict[str, Any]:
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
        "attempt_errors": r.attempt_errors,
        "messages": out.messages if out else None,
        "rollout_metrics": out.rollout_metrics if out else None,
        "score": r.score,
        "reward": r.reward,
        "rewards": r.component_scores,
        "reward_metrics": r.component_metrics,
        "advantage": r.advantage,
        "num_llm_calls": r.num_calls,
        "response_tokens": r.response_tokens,
        "prompt_tokens": r.sequences[0].prompt_length if r.sequences else 0,
        "template_rewrites": r.template_rewrites,
        "latency_s": round(r.latency_s, 4),
        "tokens": [
            {
                "input_ids": row.input_ids,
                "loss_mask": row.loss_mask,
                "logprobs": [round(x, 4) for x in row.sampled_logprobs],
                "weight_versions": sorted(set(row.sampled_versions())),
            }
            for row in r.sequences
        ],
    }
