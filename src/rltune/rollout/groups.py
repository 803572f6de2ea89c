"""One prompt's group: ``n`` rollouts of the same prompt, then scored together.

This is the one "rollouts → scored group" step shared by training, validation, evaluation
(``rltune eval``) and ``rltune test-functions``: the runner runs the attempts (with retries),
the rewarder scores the group (a group reward sees every rollout of it; a discard drops the
whole group). Pass ``rewarder=None`` when nothing is scored (on-policy distillation without
reward functions).

Example::

    results = await run_group(runner, rewarder, prompt, sample_id="job-s0-p3",
                              sample_index=3, row_index=17, n=8)
    has_signal(results)  # does this prompt teach anything?
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from rltune.config.data import DataRow
from rltune.rollout.results import RolloutResult
from rltune.rollout.rewarder import Rewarder
from rltune.rollout.runner import RolloutRunner


async def run_group(runner: RolloutRunner, rewarder: Optional[Rewarder], prompt: DataRow, *,
                    sample_id: str, sample_index: int, row_index: int,
                    n: int, trainer_state: Optional[dict[str, Any]] = None) -> list[RolloutResult]:
    """``n`` rollouts of ``prompt`` (ids ``<sample_id>.r<k>``), scored together.
    ``trainer_state`` (e.g. ``{"global_step": 3}``) reaches the reward functions."""
    results = list(await asyncio.gather(*(
        runner.run(prompt, rollout_id=f"{sample_id}.r{k}", sample_id=sample_id,
                   sample_index=sample_index, row_index=row_index)
        for k in range(n)
    )))
    if rewarder is not None:
        await rewarder.score_group(results, prompt.ground_truth, trainer_state=trainer_state)
    return results
