"""A TRL user's day one: their dataset (parquet or JSONL, TRL's shapes), their reward function
(TRL's own ``accuracy_reward``) and their config names (``num_generations``, ``beta``) train
a job as they are."""

from __future__ import annotations

import json

import pytest
import yaml

pytest.importorskip("math_verify", reason="pip install 'rltune[math]'")

QUESTIONS = [("What is 2 + 3?", "5"), ("What is 4 + 4?", "8"), ("What is 9 - 2?", "7"),
             ("What is 3 * 3?", "9")]


def trl_rows(conversational: bool) -> list[dict]:
    """TRL's prompt-only rows: a list of messages (conversational, difficulty 0-3) or a string
    prompt (standard, difficulty 4-7), plus the columns a TRL reward reads."""
    offset = 0 if conversational else len(QUESTIONS)
    return [{"prompt": [{"role": "user", "content": q}] if conversational else q + " ",
             "solution": f"${a}$", "difficulty": offset + i}
            for i, (q, a) in enumerate(QUESTIONS)]


def write_job(ws, accuracy: str) -> None:
    # kwargs.py checks the other keywords TRL passes: every column, completion_ids and
    # trainer_state; its score encodes them so the test can read them back
    (ws / "kwargs.py").write_text(
        "def seen(completions, completion_ids, trainer_state, difficulty, solution, **kw):\n"
        "    return [1000.0 * len(ids) + 10.0 * trainer_state.global_step + d\n"
        "            for ids, d in zip(completion_ids, difficulty)]\n")
    (ws / "job.yaml").write_text(yaml.safe_dump({
        "model": str(ws / "model"),
        "datasets": [{"type": "training", "file_name": "train.parquet"},
                     {"type": "training", "file_name": "train.jsonl"}],
        "functions": [
            {"type": "reward", "name": "accuracy", "fcmodel": {"classpath": accuracy},
             "runtime": {"capacity": 1, "max_capacity": 1}},
            {"type": "reward", "name": "kwargs", "weight": 0.0,
             "fcmodel": {"classpath": "kwargs.py:seen"},
             "runtime": {"capacity": 1, "max_capacity": 1}}],
        "training": {"hyper_parameters": {
            "algorithm": "grpo", "batch_size": 8, "num_generations": 4, "beta": 0.01,
            "max_steps": 1, "max_length": 40, "max_prompt_length": 32,
            "save_strategy": "no"}}}))


def accuracy_classpath(ws) -> str:
    """TRL's ``accuracy_reward`` as-is when TRL imports, else a file with its signature over
    math_verify (what TRL's does)."""
    try:
        from trl.rewards import accuracy_reward  # noqa: F401
    except Exception:
        (ws / "trl_accuracy.py").write_text(
            "from rltune.sdk.mathscore import accuracy_reward as _ours\n"
            "def accuracy_reward(completions, solution, **kwargs):\n"
            "    return _ours(completions, solution, **kwargs)\n")
        return "trl_accuracy.py:accuracy_reward"
    return "trl.rewards:accuracy_reward"


async def test_trl_parquet_and_jsonl_train_with_trls_accuracy_reward(tmp_path, tiny_model_dir):
    """One job, two training files: TRL's conversational rows in parquet and its standard
    rows in JSONL; one step samples all 8 prompts x num_generations 4."""
    import shutil

    pa = pytest.importorskip("pyarrow", reason="pip install 'rltune[data]'")
    import pyarrow.parquet as pq

    from rltune.config.overrides import load_job_config_with_sets
    from rltune.trainer.loop import Trainer

    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copytree(tiny_model_dir, ws / "model")
    pq.write_table(pa.Table.from_pylist(trl_rows(conversational=True)), ws / "train.parquet")
    (ws / "train.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in trl_rows(conversational=False)))
    write_job(ws, accuracy_classpath(ws))
    job = load_job_config_with_sets(ws / "job.yaml", [])
    assert (job.hyper_parameters.n_rollouts, job.hyper_parameters.kl_loss_coef) == (4, 0.01)
    job_dir = tmp_path / "job"
    summary = await Trainer(job, job_dir=job_dir, base_dir=ws).run()
    traj = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
    assert len(traj) == 8 * 4, summary  # batch_size prompts x num_generations
    seen = set()
    for t in traj:
        assert t["status"] == "success", t["error"]
        assert t["rewards"]["accuracy"] in (0.0, 1.0)  # the solution column reached it
        # completion_ids = the sampled tokens; trainer_state.global_step = 1; the column
        difficulty = t["rewards"]["kwargs"] - 1000.0 * t["response_tokens"] - 10.0
        assert difficulty in range(8), t["rewards"]
        seen.add(int(difficulty))
    assert seen == set(range(8))  # every row of both files, each with its own column value
