"""Each detector on constructed metric series: it fires on its failure and stays silent on a
healthy run (the same healthy series for every code)."""

from __future__ import annotations

import pytest

from rltune.config.advisor import DEFAULT_THRESHOLDS, AdvisorConfig
from rltune.doctor import DETECTORS, diagnose
from rltune.doctor.advisor import rollout_features


def healthy(n: int = 20) -> list[dict]:
    """A run that learns: reward and validation up, KL small, entropy steady, no failures."""
    steps = []
    for i in range(1, n + 1):
        row = {
            "step": i,
            "critic/rewards/mean": 0.3 + 0.02 * i + (0.01 if i % 2 else -0.01),
            "actor/ppo_kl": 1e-3,
            "actor/grad_norm": 0.5,
            "actor/kl_loss": 0.01 + 0.0005 * i,
            "actor/entropy": 1.0 - 0.01 * i,
            "trajectory/response_length/mean": 40.0 + (1 if i % 2 else -1),
            "trajectory/response_length/clip_ratio": 0.02,
            "timing/s/step": 5.0,
            "timing/s/rollout": 3.0,
            "trace/reward/exact/mean": 0.3 + 0.02 * i,
            "trace/reward/format/mean": 0.2,
            "trace/attempts/agent/mean": 1.0,
            "trajectory/template_rewrites": 0.0,
            "doctor/rollouts": 64.0,
            "doctor/dropped_share": 0.0,
            "doctor/errors": {},
            "doctor/oom_errors": 0.0,
            "doctor/identical_group_share": 0.1,
        }
        if i % 5 == 0:
            row["validation/data/reward/mean@1"] = 0.4 + 0.01 * i
        steps.append(row)
    return steps


def with_(steps: list[dict], **series) -> list[dict]:
    """``steps`` with ``key=fn(i)`` replacing a metric (``__`` stands for ``/``)."""
    for key, fn in series.items():
        name = key.replace("__", "/")
        for s in steps:
            s[name] = fn(s["step"])
    return steps


def fires(code: str, steps: list[dict], **over) -> dict | None:
    th = {**DEFAULT_THRESHOLDS[code], **over}
    return DETECTORS[code].fn(steps, th)


def test_every_code_has_thresholds_and_the_healthy_run_raises_none():
    assert set(DETECTORS) == set(DEFAULT_THRESHOLDS)
    for code in DETECTORS:
        assert fires(code, healthy()) is None, code
    assert diagnose(healthy()) == []


FAILURES = {
    "P1": lambda s: with_(s, **{"critic__rewards__mean": lambda i: 0.5,
                                "actor__ppo_kl": lambda i: 0.0,
                                "actor__grad_norm": lambda i: 1e-6}),
    "P2": lambda s: with_(s, critic__rewards__mean=lambda i: 0.2 if i % 2 else 0.7),
    "P3": lambda s: with_(s, actor__kl_loss=lambda i: 0.01 * 2 ** i),  # 0.64 from step 6
    "kl-zero": lambda s: with_(s, **{"actor__kl_loss": lambda i: 0.0,
                                     "critic__rewards__mean": lambda i: 0.4}),
    "P4": lambda s: with_(s, **{"actor__entropy": lambda i: 1.0 if i < 10 else 0.01,
                                "doctor__identical_group_share": lambda i: 0.6}),
    "slow-rollouts": lambda s: with_(s, **{"timing__s__step": lambda i: 100.0,
                                           "timing__s__rollout": lambda i: 98.0}),
    "OOM": lambda s: with_(s, doctor__oom_errors=lambda i: 2.0 if i == 20 else 0.0),
    "P6": lambda s: with_(s, **{"validation__data__reward__mean@1":
                                lambda i: (0.8 if i == 5 else 0.5) if i % 5 == 0 else None}),
    "P9": lambda s: with_(s, trajectory__response_length__clip_ratio=lambda i: 0.8),
    "hack/length": lambda s: with_(s, **{"trajectory__response_length__mean": lambda i: 1.2 ** i,
                                         "critic__rewards__mean": lambda i: 0.05 * i}),
    "hack/divergence": lambda s: with_(s, **{"validation__data__reward__mean@1":
                                             lambda i: 0.5 - 0.01 * i if i % 5 == 0 else None}),
    "hack/component": lambda s: with_(s, trace__reward__format__mean=lambda i: 0.01),
    "hack/format": lambda s: with_(s, **{"trace__reward__format__mean": lambda i: 0.9,
                                         "trace__reward__exact__mean": lambda i: 0.1}),
    "hack/mode-collapse": lambda s: with_(s, doctor__identical_group_share=lambda i: 0.9),
    "pipeline/dropped": lambda s: with_(s, doctor__dropped_share=lambda i: 0.5),
    "pipeline/error": lambda s: with_(s, doctor__errors=lambda i: {"Timeout after Ns": 4,
                                                                   "boom": 1}),
    "pipeline/template-rewrites": lambda s: with_(s, trajectory__template_rewrites=lambda i: 30),
    "pipeline/staleness": lambda s: with_(s, fully_async__staleness__mean=lambda i: 0.1 * i),
    "pipeline/capacity": lambda s: with_(s, trace__attempts__agent__mean=lambda i: 2.5),
}


def _drop_none(steps: list[dict]) -> list[dict]:
    return [{k: v for k, v in s.items() if v is not None} for s in steps]


@pytest.mark.parametrize("code", sorted(DETECTORS))
def test_each_detector_fires_on_its_failure(code):
    steps = _drop_none(FAILURES[code](healthy()))
    evidence = fires(code, steps)
    assert evidence is not None, code
    assert evidence["steps"][0] <= evidence["steps"][1] <= 20
    assert code in [a.code for a in diagnose(steps)]


def test_p6_is_silent_when_the_training_reward_falls_with_validation():
    steps = _drop_none(FAILURES["P6"](with_(healthy(), critic__rewards__mean=lambda i: 0.5)))
    assert fires("P6", steps) is None


def test_p9_fires_when_a_third_of_the_answers_are_cut_and_not_on_a_few():
    """A third of the answers cut at max_length for six steps is a truncation problem (it got
    no alert at a threshold of one half); one in twenty is the usual tail."""
    third = with_(healthy(6), trajectory__response_length__clip_ratio=lambda i: 1 / 3)
    assert "P9" in [a.code for a in diagnose(_drop_none(third))]
    assert fires("P9", third)["clip_ratio"] == pytest.approx(1 / 3, abs=1e-6)
    few = with_(healthy(6), trajectory__response_length__clip_ratio=lambda i: 0.05)
    assert "P9" not in [a.code for a in diagnose(_drop_none(few))]


def test_p9_is_silent_on_one_long_batch_of_a_healthy_run():
    """The default GSPO learning run's own series (nano, 20 steps, max_length 256): one batch
    at step 5 had 31 % cut while the policy learned to use its tool; the 3-step mean of 0.14
    fired P9 when it was a mean. Sustained truncation is what P9 is for."""
    series = [0.0, 0.0, 0.0, 0.109, 0.3125, 0.047, 0.031, 0.047, 0.031, 0.016, 0.047]
    steps = with_(healthy(len(series)),
                  trajectory__response_length__clip_ratio=lambda i: series[i - 1])
    steps = _drop_none(steps)
    assert [k for k in range(1, len(steps) + 1) if fires("P9", steps[:k])] == []


def test_thresholds_overrides_and_off_take_effect():
    steps = _drop_none(FAILURES["P9"](healthy()))
    assert "P9" in [a.code for a in diagnose(steps)]
    assert "P9" not in [a.code for a in diagnose(steps, AdvisorConfig(off=["P9"]))]
    strict = AdvisorConfig(thresholds={"P9": {"clip_ratio": 0.9}})
    assert "P9" not in [a.code for a in diagnose(steps, strict)]
    assert diagnose(steps, AdvisorConfig(enabled=False)) == []


def test_rollout_features_counts_failures_errors_and_identical_groups():
    recs = [
        {"status": "success", "sample_index": 0, "messages": [{"role": "assistant",
                                                               "content": "42"}]},
        {"status": "success", "sample_index": 0, "messages": [{"role": "assistant",
                                                               "content": "42"}]},
        {"status": "success", "sample_index": 1, "messages": [{"role": "assistant",
                                                               "content": "1"}]},
        {"status": "success", "sample_index": 1, "messages": [{"role": "assistant",
                                                               "content": "2"}]},
        {"status": "failed", "sample_index": 2, "error": "CUDA out of memory 12 GiB"},
    ]
    f = rollout_features(recs)
    assert f["doctor/rollouts"] == 5 and f["doctor/dropped_share"] == 0.2
    assert f["doctor/identical_group_share"] == 0.5
    assert f["doctor/oom_errors"] == 1.0 and f["doctor/errors"] == {"CUDA out of memory N GiB": 1}


def test_rollout_features_give_the_standard_error_of_the_steps_mean_reward():
    recs = [{"status": "success", "sample_index": i // 2, "reward": r, "messages": []}
            for i, r in enumerate([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])]  # group means 0.5, 1, 0
    recs.append({"status": "failed", "sample_index": 3, "error": "boom"})  # no reward
    se = rollout_features(recs)["doctor/reward_se"]
    assert se == pytest.approx((0.25 / 3) ** 0.5)  # sample variance 0.25 over 3 prompts
    assert "doctor/reward_se" not in rollout_features(recs[:2])  # one prompt: no spread


def test_p2_is_silent_on_swings_the_batches_own_noise_explains():
    """The multistep template's healthy run (8 chains of 2-4 calls a step): its reward swung
    0.25-0.31 a step, changing direction in 5 of 6, while each batch's mean had a standard
    error of 0.10-0.23. The same swings from batches ten times surer are an oscillation."""
    swings = with_(healthy(), critic__rewards__mean=lambda i: 0.5 + (0.14 if i % 2 else -0.14))
    assert fires("P2", _drop_none(swings)) is not None  # no noise logged: as before
    noisy = with_(swings, doctor__reward_se=lambda i: 0.18)
    assert fires("P2", noisy) is None
    assert "P2" not in [a.code for a in diagnose(noisy)]
    sure = with_(swings, doctor__reward_se=lambda i: 0.018)
    evidence = fires("P2", sure)
    assert evidence["chance_swing"] == pytest.approx(2 / 3.14159265 ** 0.5 * 0.018, rel=1e-4)
    assert fires("P2", noisy, noise=1.0) is not None  # the threshold takes effect


def test_p4_is_silent_while_the_groups_still_disagree():
    """The multistep template's healthy run (seed 2): entropy 0.12 -> 0.03-0.05 nats a token
    (tool-call syntax is nearly fixed) while 0-0.25 of its groups gave one final answer and
    validation rose 0.24 -> 0.50 (at an `agree` of 0.25, P4 came and went six times in that
    run: groups on easy chains agree by being right). Low entropy with most groups agreeing
    is still a collapse."""
    low = with_(healthy(), actor__entropy=lambda i: 0.12 if i < 10 else 0.04)
    disagree = with_(low, doctor__identical_group_share=lambda i: 0.1)
    assert fires("P4", disagree) is None
    assert "P4" not in [a.code for a in diagnose(disagree)]
    agree = with_(low, doctor__identical_group_share=lambda i: 0.6)
    assert fires("P4", agree)["identical_group_share"] == pytest.approx(0.6)
    assert fires("P4", disagree, agree=0.05) is not None  # the threshold takes effect
    unlogged = [{k: v for k, v in s.items() if k != "doctor/identical_group_share"}
                for s in low]
    assert fires("P4", unlogged) is not None  # without the groups: entropy alone, as before


@pytest.mark.parametrize("code", ["P4", "hack/mode-collapse"])
def test_a_solved_task_is_convergence_not_collapse(code):
    """The GSPO learning run under AVX2 (seed 3) ended at reward ~0.92 of a best 1.0 with
    entropy 0.18 -> 0.04 and half its groups answering alike: a solved task, not a collapse.
    The same entropy and agreement at reward 0.3 still fire."""
    def run(reward: float) -> list[dict]:
        return with_(healthy(), **{"actor__entropy": lambda i: 0.18 if i < 10 else 0.04,
                                   "doctor__identical_group_share": lambda i: 0.5,
                                   "critic__rewards__max": lambda i: 1.0,
                                   "critic__rewards__mean": lambda i: reward})

    assert fires(code, run(0.92)) is None
    assert fires(code, run(0.3)) is not None


def test_length_growing_with_reward_in_the_first_steps_is_learning():
    """The GSPO learning run under AVX2 (seed 7) lengthened its answers 18 -> 24 tokens while
    its reward rose over steps 1-6 (it learned to call the calculator): not a hack."""
    early = with_(healthy(6), **{"trajectory__response_length__mean": lambda i: 14 + 2.0 * i,
                                 "critic__rewards__mean": lambda i: 0.3 + 0.08 * i})
    assert fires("hack/length", early) is None
    assert fires("hack/length", early, warmup=0) is not None
