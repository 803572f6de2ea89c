"""On-policy distillation (training.type pg_opd): the teacher module, and real OPD jobs through
``Trainer`` with tiny models (student and teacher share the project tokenizer)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from rltune.config import load_job_config, load_job_config_text
from rltune.sdk.errors import ConfigError
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.signals.teacher import Teacher, check_same_vocabulary
from rltune.trainer.sink import read_metrics

QUESTIONS = ["Calculate 5 + 9.", "What is 7 * 6?", "Calculate 12 - 4.", "What is 3 + 3?",
             "Calculate 8 / 2.", "What is 9 * 9?", "Calculate 1 + 2.", "What is 6 - 5?"]


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another untrained tiny model (seed 1) with the student's tokenizer."""
    from rltune.models import build_tiny_model, save_model

    model, tokenizer = build_tiny_model(seed=1)
    return save_model(model, tokenizer, tmp_path_factory.mktemp("teacher") / "tiny-teacher")


@pytest.fixture(scope="module")
def overconfident_student_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed-0 tiny model made overconfident: its final norm scaled 10x scales its logits
    (tied embeddings), so it starts far from the teacher (reverse KL ~5 nats) on tokens it
    samples itself. An untrained student left near uniform samples the tokens a sharp
    teacher prefers too rarely for a few steps to show learning."""
    from rltune.models import build_tiny_model, save_model

    model, tokenizer = build_tiny_model(seed=0)
    with torch.no_grad():
        model.model.norm.weight.mul_(10.0)
    return save_model(model, tokenizer, tmp_path_factory.mktemp("student") / "tiny-student")


def _direct_logprobs(model, ids: list[int], temperature: float) -> list[float]:
    logits = model(input_ids=torch.tensor([ids])).logits[0, :-1] / temperature
    logp = torch.log_softmax(logits.float(), dim=-1)
    return [0.0, *logp.gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1).tolist()]


# ---------------------------------------------------------------------- the teacher module


def test_teacher_logprobs_equal_a_direct_computation(tiny_model_dir, teacher_dir):
    from transformers import AutoModelForCausalLM

    from rltune.models import load_tokenizer

    student_tok = load_tokenizer(tiny_model_dir)
    teacher = Teacher.load(teacher_dir, student_tokenizer=student_tok, student_name="tiny",
                           temperature=0.7, micro_batch_size=2, pad_token_id=0)
    assert not teacher.model.training
    assert all(not p.requires_grad and p.dtype == torch.float32
               for p in teacher.model.parameters())
    rows = [[5, 9, 11, 40, 3], [5, 9], [7, 8, 30, 31, 32, 33, 2]]  # ragged: padding and chunks
    got = teacher.logprobs(rows)
    reference = AutoModelForCausalLM.from_pretrained(teacher_dir).eval()
    with torch.no_grad():
        for row, lp in zip(rows, got, strict=True):
            assert lp == pytest.approx(_direct_logprobs(reference, row, 0.7), abs=1e-4)


def test_a_teacher_with_another_tokenizer_is_a_clear_error(tiny_model_dir, tmp_path):
    from rltune.models import build_model, load_tokenizer, save_model, train_tokenizer

    other_tok = train_tokenizer(seed=0, vocab_size=200)
    other = save_model(build_model("tiny", other_tok, seed=1), other_tok, tmp_path / "other")
    with pytest.raises(ConfigError) as info:
        Teacher.load(other, student_tokenizer=load_tokenizer(tiny_model_dir),
                     student_name="my-student", teacher_name="my-teacher")
    err = info.value
    assert "my-teacher" in str(err) and "my-student" in str(err) and "tokenizer" in str(err)
    assert err.where == "teacher_model" and "same tokenizer" in err.hint


def test_vocabulary_check_names_a_differing_token():
    check_same_vocabulary({"a": 0, "b": 1}, {"b": 1, "a": 0}, student="s", teacher="t")
    with pytest.raises(ConfigError, match=r"'b' is id 1 for the student, 2 for the teacher"):
        check_same_vocabulary({"a": 0, "b": 1}, {"a": 0, "b": 2}, student="s", teacher="t")


# ---------------------------------------------------------------------- config


def test_opd_needs_no_rollout_or_reward_but_algorithm_opd_needs_a_teacher():
    job = load_job_config_text("model: m\nteacher_model: t\n"
                               "datasets: [{type: training, file_name: d.jsonl}]\n")
    assert job.rollout is None and not job.rewards and job.knobs.advantage_estimator == "opd"
    with pytest.raises(ConfigError, match="teacher_model"):
        load_job_config_text("model: m\ntraining: {hyper_parameters: {algorithm: opd}}\n")


# ---------------------------------------------------------------------- end to end


def _opd_workspace(tmp_path: Path, student: Path, teacher: Path, *, reward: bool, **hp) -> Path:
    """A job with the built-in single-turn rollout and short plain prompts (no tools)."""
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=4, val_rows=2)  # for functions/reward.py
    for name, questions in (("train", QUESTIONS), ("val", QUESTIONS[:4])):
        rows = [{"messages": [{"role": "user", "content": q}],
                 "rollout_extra": {"solution": "1"}} for q in questions]
        (ws / "data" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(student)
    job["teacher_model"] = str(teacher)
    job["functions"] = [f for f in job["functions"] if reward and f["type"] == "reward"]
    job["training"] = {"type": "pg_opd", "hyper_parameters": {
        "batch_size": 4, "n_rollouts": 2, "max_length": 48, "max_prompt_length": 36,
        "learning_rate": 1e-3, "temperature": 1.0, "eval_steps": 100, "val_n_rollouts": 4,
        "save_strategy": "no", "seed": 0, **hp}}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def test_opd_job_without_reward_moves_the_student_towards_the_teacher(
    tmp_path, overconfident_student_dir, teacher_dir
):
    ws = _opd_workspace(tmp_path, overconfident_student_dir, teacher_dir, reward=False,
                        n_epochs=4)
    job_dir = tmp_path / "job"
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws)
    summary = await trainer.run()
    rows = read_metrics(job_dir)
    assert [r["step"] for r in rows] == list(range(summary["steps"] + 1))
    first, last = rows[0]["metrics"], rows[-1]["metrics"]
    # No reward function: no reward metrics, nothing dropped, every number finite.
    assert not any(k.startswith(("critic/rewards", "validation/data/reward")) for k in last)
    assert "trace/success_rate/reward" not in last and last["train/dropped_rollouts"] == 0
    assert all(math.isfinite(v) for r in rows for v in r["metrics"].values())
    # Learning is real: the reverse KL to the teacher falls, on fixed validation prompts and
    # in training (first steps vs last steps). Typical: 5.5 -> 0.5 nats in 8 steps.
    assert last["validation/teacher_kl"] < 0.4 * first["validation/teacher_kl"]
    kl = [r["metrics"]["actor/teacher_kl"] for r in rows[1:]]
    assert len(kl) == 8 and sum(kl[-2:]) < 0.4 * sum(kl[:2])
    traj = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
    assert all(t["status"] == "success" and t["reward"] is None for t in traj)
    assert summary["final_reward"] is None


async def test_opd_job_with_a_reward_function_reports_rewards_as_metrics(
    tmp_path, tiny_model_dir, teacher_dir
):
    ws = _opd_workspace(tmp_path, tiny_model_dir, teacher_dir, reward=True, n_epochs=1,
                        batch_size=8, n_rollouts=1, val_n_rollouts=1)
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    step0, step1 = (r["metrics"] for r in read_metrics(job_dir))
    assert step1["critic/rewards/mean"] == 0.0 and "trace/reward/exact/mean" in step1
    # teacher_kl is a sampled estimate (mean log-ratio over the sampled tokens): between two
    # near-uniform tiny models it sits around 0 and may come out slightly negative
    assert math.isfinite(step1["actor/teacher_kl"]) and step1["train/trainable_rows"] == 8
    assert step0["validation/data/reward/mean@1"] == 0.0
    assert math.isfinite(step0["validation/teacher_kl"])
