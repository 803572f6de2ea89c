"""`rltune init workspace` and `rltune train` through the real CLI (CliRunner)."""

import json

import yaml
from typer.testing import CliRunner

from rltune.cli.main import app

runner = CliRunner()


def test_init_workspace_writes_template_and_data(tmp_path):
    ws = tmp_path / "agent"
    res = runner.invoke(
        app, ["init", "workspace", str(ws), "--train-rows", "20", "--val-rows", "5"]
    )
    assert res.exit_code == 0, res.output
    assert (ws / "functions" / "rollout.py").is_file() and (ws / "job.yaml").is_file()
    rows = [json.loads(x) for x in (ws / "data" / "train.jsonl").open()]
    assert len(rows) == 20 and rows[0]["tools"][0]["function"]["name"] == "calculator"
    # Single-digit questions, like the demo models' warm start.
    assert all(abs(int(r["rollout_extra"]["solution"])) <= 81 for r in rows)
    again = runner.invoke(app, ["init", "workspace", str(ws)])
    assert again.exit_code == 2 and "not empty" in again.output


def test_init_unknown_template_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["init", "workspace", str(tmp_path / "x"), "-t", "nope"])
    assert res.exit_code == 2 and "unknown template 'nope'" in res.output


def test_train_runs_a_job_in_the_foreground(tmp_path, tiny_model_dir):
    ws = tmp_path / "agent"
    assert (
        runner.invoke(
            app, ["init", "workspace", str(ws), "--train-rows", "4", "--val-rows", "2"]
        ).exit_code
        == 0
    )
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update(
        batch_size=2,
        n_rollouts=2,
        ppo_mini_batch_size=4,
        max_length=200,
        max_prompt_length=180,
        save_steps=1,
    )
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-2").is_dir()
    assert '"steps": 2' in res.output
    # Not a terminal: no live bar, a progress line a step instead.
    steps = [line for line in res.output.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == ["1/2", "2/2"], res.output
    assert " reward " in steps[-1] and " val " in steps[-1] and steps[-1].endswith(" s")
    last = res.output.strip().splitlines()[-1]  # the one-line summary ends the run
    assert last.startswith("validation ") and " → " in last and last.endswith(" s"), last


def test_progress_line_shows_the_bars_fields():
    from rltune.cli.train_cmd import progress_line

    state = {"step": 5, "total_steps": 64, "reward": 0.671875, "validation_reward": None,
             "tokens_per_s": 280.6}
    assert progress_line(state, 38.4) == "step 5/64 reward 0.672 val - 281 tok/s 38 s"
    assert "teacher KL 0.125" in progress_line({**state, "teacher_kl": 0.125}, 1)


def test_summary_line_names_the_rise_the_best_and_the_time():
    from rltune.cli.train_cmd import summary_line

    run = {"initial_validation": 0.4375, "validation": [[5, 0.81], [25, 0.93], [30, 0.82]]}
    assert summary_line(run, 415) == "validation 0.44 → 0.82 (best 0.93 at step 25) in 6 min 55 s"
    run["validation"][-1] = [30, 0.93]
    assert summary_line(run, 59.6) == "validation 0.44 → 0.93 in 1 min 0 s"
    assert summary_line({"steps": 4, "validation": []}, 12) == "4 steps in 12 s"
    stopped = {"initial_validation": 0.5, "validation": [[8, 0.8], [16, 0.91]],
               "stopped_at_validation_reward": 16}
    assert summary_line(stopped, 300) == (
        "validation 0.50 → 0.91 (target reached at step 16) in 5 min 0 s")


def test_train_bad_config_names_the_field(tmp_path):
    bad = tmp_path / "job.yaml"
    bad.write_text(
        "name: x\nmodel: {name: nano}\ntraining:\n  hyper_parameters:\n    batch_sise: 4\n"
    )
    res = runner.invoke(app, ["train", "-c", str(bad)])
    assert res.exit_code == 2
    assert "batch_sise" in res.output and "batch_size" in res.output


NAN_REWARD = '''
from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput


class AlwaysNaN(AbstractRewardProcessor):
    def process(self, input_data: RewardInput) -> RewardOutput:
        return RewardOutput(reward=Reward(reward_score=float("nan")))
'''


def test_a_job_whose_steps_have_no_successful_rollout_fails(tmp_path, tiny_model_dir):
    ws = tmp_path / "agent"
    assert runner.invoke(app, ["init", "workspace", str(ws), "--train-rows", "6",
                               "--val-rows", "2"]).exit_code == 0
    (ws / "functions" / "nan_reward.py").write_text(NAN_REWARD)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["datasets"] = [d for d in job["datasets"] if d["type"] == "training"]
    reward = next(f for f in job["functions"] if f["type"] == "reward")
    reward["fcmodel"]["classpath"] = "functions/nan_reward.py:AlwaysNaN"
    job["training"]["hyper_parameters"].update(
        batch_size=2, n_rollouts=2, ppo_mini_batch_size=4, max_length=120,
        max_prompt_length=100, save_strategy="steps", save_steps=1, max_failed_step_share=0.4,
        stop_at_validation_reward=None,  # it needs the validation data removed above
    )
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    rollout = ws / "functions" / "rollout.py"  # the user's own print and logger lines
    rollout.write_text(rollout.read_text().replace(
        "        res = input_data.model_resource\n",
        "        res = input_data.model_resource\n"
        "        print('user-print-line', flush=True)\n"
        "        __import__('logging').getLogger('calc.agent').info('user-logger-line')\n", 1))
    out = tmp_path / "out"
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(out), "--quiet"])
    assert res.exit_code == 1, res.output  # the job failed (2 is a usage error)
    # the job log keeps the user's lines and none of httpx's INFO `HTTP Request: POST …`
    log = (out / "train.log").read_text()
    assert "user-print-line" in log and "user-logger-line" in log, log
    assert "HTTP Request" not in log and "httpx" not in log, log
    text = " ".join(res.output.split())
    # 3 steps planned; the second failed one is more than 0.4 x 3: the job stops there
    assert "2 of 3 steps had no successful rollout" in text, text
    assert "(4 of 4 rollouts)" not in text and "(8 of 8 rollouts): reward" in text
    assert "reward exact: process() returned a non-finite number" in text
    assert "max_failed_step_share" in text
    assert not (out / "checkpoints" / "checkpoint-2").exists()  # no checkpoint of the failure
