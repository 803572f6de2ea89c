"""The signal table: rollouts in, training rows with one advantage per token out."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import pytest

from rltune.config import HyperParameters, resolve_algorithm
from rltune.gateway.rows import TokenSequence
from rltune.rollout.results import RolloutResult, has_signal, trajectory_record
from rltune.sdk.errors import TrainingFailedError
from rltune.trainer.outcome import FailedSteps
from rltune.trainer.rows import record_notes
from rltune.trainer.signals.ppo import CriticSignal
from rltune.trainer.signals.table import SIGNALS, GroupSignal, TeacherSignal, build_signal
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import PolicyUpdater


def _result(rid: str, group: int, score, *, sampled: int = 2, ok: bool = True,
            reward_error=None) -> RolloutResult:
    ids = [1, 4, 5] + [6] * sampled
    row = TokenSequence(input_ids=ids, loss_mask=[0, 0, 0] + [1] * sampled,
              sampled_logprobs=[0.0, 0.0, 0.0] + [-0.5] * sampled, prompt_length=3)
    return RolloutResult(rid, f"s{group}", group, group, ok=ok, sequences=[row] if ok else [],
                         score=score, reward_error=reward_error)


def test_the_table_is_keyed_by_the_estimator():
    assert {"grpo": GroupSignal, "opd": TeacherSignal, "gae": CriticSignal} == SIGNALS
    for algorithm in ("grpo", "gspo", "dapo"):
        hp = HyperParameters(algorithm=algorithm)
        sig = build_signal(hp, resolve_algorithm(hp), updater=None, teacher=None,
                           has_rewards=True)
        assert isinstance(sig, GroupSignal) and sig.scores_rollouts
    hp = HyperParameters()
    knobs = resolve_algorithm(hp, "pg_opd")
    sig = build_signal(hp, knobs, updater=SimpleNamespace(), teacher=_Teacher(),
                       has_rewards=False)
    assert isinstance(sig, TeacherSignal) and not sig.scores_rollouts
    with pytest.raises(ValueError, match="needs the policy's updater and the teacher"):
        build_signal(hp, knobs, updater=None, teacher=None, has_rewards=False)


def test_usable_and_has_signal():
    a, b = _result("a", 0, 1.0), _result("b", 0, 0.0)
    failed = _result("c", 0, None, ok=False)
    nan = _result("d", 0, None, reward_error="reward_score is nan")
    assert a.usable and not failed.usable and not nan.usable
    assert has_signal([a, b]) and not has_signal([a, failed, nan])
    assert not has_signal([a, _result("e", 0, 1.0)])


async def test_group_signal_gives_every_token_its_rollouts_advantage():
    hp = HyperParameters(algorithm="grpo", n_rollouts=2)
    sig = GroupSignal(hp, resolve_algorithm(hp))
    results = [_result("a", 0, 1.0), _result("b", 0, 0.0, sampled=3), _result("c", 1, 0.5),
               _result("d", 1, 0.5), _result("e", 1, None, ok=False)]
    out = await sig.rows(results)
    rows = out.rows
    assert [r.rollout_id for r in rows] == ["a", "b", "c", "d"]
    assert results[0].reward is None and results[0].advantages == []  # the signal wrote nothing
    record_notes(results, out.notes)  # what the step does with them
    # (1 - 0.5) / (std 0.7071 + 1e-6) on every token of "a", its negative on "b"
    assert rows[0].advantage == pytest.approx([0.7071] * 5, abs=1e-4)
    assert rows[1].advantage == pytest.approx([-0.7071] * 6, abs=1e-4)
    assert rows[2].advantage == [0.0] * 5  # a flat group trains with advantage 0
    assert results[0].advantage == pytest.approx(0.7071, abs=1e-4)
    assert results[0].reward == results[0].score == 1.0 and results[4].reward is None
    assert sig.trains(results[0]) and not sig.trains(results[4])


async def test_shaping_keeps_the_raw_score_apart_from_the_reward():
    hp = HyperParameters(algorithm="dapo", n_rollouts=2, max_length=12, max_prompt_length=4,
                         overlong_buffer_len=4, overlong_penalty_factor=1.0)
    sig = GroupSignal(hp, resolve_algorithm(hp))
    short, long = _result("a", 0, 1.0, sampled=2), _result("b", 0, 1.0, sampled=6)
    out = await sig.rows([short, long])
    rows = out.rows
    record_notes([short, long], out.notes)
    # budget 8 tokens, buffer 4: 6 sampled tokens are 2 into the buffer -> -2/4 * 1.0
    assert (short.score, short.reward) == (1.0, 1.0)
    assert (long.score, long.reward) == (1.0, pytest.approx(0.5))
    assert rows[0].advantage[0] > 0 > rows[1].advantage[0]
    record = trajectory_record(long)
    assert record["score"] == 1.0 and record["reward"] == pytest.approx(0.5)


async def test_group_signal_without_any_signal_trains_nothing():
    hp = HyperParameters(algorithm="grpo", n_rollouts=2)
    sig = GroupSignal(hp, resolve_algorithm(hp))
    out = await sig.rows([_result("a", 0, 1.0), _result("b", 0, 1.0)])
    assert out.rows == [] and out.notes["a"].reward == 1.0


class _Teacher:
    """A teacher whose log-prob of every token is -0.25."""

    def logprobs(self, rows):
        return [[0.0] + [-0.25] * (len(r) - 1) for r in rows]


async def test_teacher_signal_trains_every_rollout_that_ran_with_per_token_advantages():
    hp = HyperParameters(algorithm="grpo", learning_rate=0.0)
    updater = PolicyUpdater(tiny_qwen2(vocab_size=16), hp, resolve_algorithm(hp, "pg_opd"),
                            total_steps=1)
    sig = TeacherSignal(hp, updater, _Teacher(), has_rewards=True)
    ran = _result("a", 0, None, reward_error="reward exact: boom")
    failed = _result("b", 0, None, ok=False)
    out = await sig.rows([ran, failed])
    rows, metrics = out.rows, out.metrics
    record_notes([ran, failed], out.notes)
    assert [r.rollout_id for r in rows] == ["a"] and metrics["train/dropped_rollouts"] == 1.0
    (row,) = rows
    student = updater.compute_logprobs(rows)[0]
    expected = [-(s - -0.25) * m for s, m in zip(student, row.loss_mask, strict=True)]
    assert row.advantage == pytest.approx(expected, abs=1e-6)
    assert row.old_logprobs == pytest.approx(student)
    sampled = [s for s, m in zip(student, row.loss_mask, strict=True) if m]
    assert metrics["actor/teacher_kl"] == pytest.approx(sum(s + 0.25 for s in sampled) / 2)
    assert math.isclose(ran.advantage, -metrics["actor/teacher_kl"], abs_tol=1e-6)


def test_a_job_fails_once_more_than_the_share_of_its_steps_failed():
    tally = FailedSteps(planned=4, max_share=0.5)
    tally.add(1, Counter({"boom": 2}), rollouts=2)
    tally.add(2, Counter({"boom": 1}), rollouts=2)  # one rollout trained: not a failed step
    tally.add(3, Counter({"hang": 1, "boom": 1}), rollouts=2)
    with pytest.raises(TrainingFailedError) as info:
        tally.add(4, Counter({"boom": 2}), rollouts=2)
    message = info.value.message
    assert "3 of 4 steps had no successful rollout" in message
    assert "(5 of 6 rollouts): boom" in message and "steps 1, 3, 4" in message
    never = FailedSteps(planned=2, max_share=1.0)
    never.add(1, Counter({"boom": 2}), rollouts=2)
    never.add(2, Counter({"boom": 2}), rollouts=2)
