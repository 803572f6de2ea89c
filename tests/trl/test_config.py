"""``rltune.trl.GRPOConfig`` and ``GRPOTrainer``'s construction: TRL's names become the job's
keys (through the synonym table), TRL's defaults apply, and whatever cannot be honoured is
named, every field at once. No model loads here."""

from __future__ import annotations

import dataclasses

import pytest

from rltune.config.job import JobConfig, validate_hyper_parameters
from rltune.sdk.errors import ConfigError
from rltune.trl import GRPOConfig, GRPOTrainer
from rltune.trl.config import TRL_DEFAULTS


def test_trl_names_and_batch_shape_reach_the_hyper_parameters():
    cfg = GRPOConfig(output_dir="out", per_device_train_batch_size=4,
                     gradient_accumulation_steps=2, num_generations=4, beta=0.04,
                     max_completion_length=48, max_prompt_length=64, max_steps=3,
                     learning_rate=2e-5, epsilon_high=0.28, num_generations_eval=2,
                     eval_strategy="steps", eval_steps=2)
    hp = validate_hyper_parameters(cfg.hyper_parameters())
    assert (hp.batch_size, hp.n_rollouts) == (2, 4)  # 4 x 2 completions / 4 generations
    assert (hp.kl_loss_coef, hp.use_kl_loss, hp.max_length) == (0.04, None, 112)  # preset
    assert (hp.clip_ratio_low, hp.clip_ratio_high) == (0.2, 0.28)
    assert (hp.max_steps, hp.learning_rate, hp.micro_batch_size) == (3, 2e-5, 4)
    assert (hp.eval_steps, hp.val_n_rollouts) == (2, 2)


def test_unset_fields_take_trls_defaults():
    hp = validate_hyper_parameters(GRPOConfig().hyper_parameters())
    assert (hp.learning_rate, hp.n_rollouts, hp.batch_size, hp.n_epochs) == (1e-6, 8, 1, 3)
    assert (hp.loss_agg_mode, hp.lr_scheduler_type, hp.seed) == ("token-mean", "linear", 42)
    assert hp.use_kl_loss is False  # beta 0: no reference model, as in TRL


@pytest.mark.slow  # importing TRL's GRPOConfig takes ~8 s
def test_the_defaults_are_trls():
    trl = pytest.importorskip("trl")
    theirs = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    assert {k: theirs[k] for k in TRL_DEFAULTS if k in theirs} == \
        {k: v for k, v in TRL_DEFAULTS.items() if k in theirs}


def test_every_field_that_cannot_be_honoured_is_named_at_once():
    with pytest.raises(ConfigError) as err:
        GRPOConfig(top_k=5, loss_type="dr_grpo", report_to="comet_ml", no_such_field=1,
                   per_device_train_batch_size=6, num_generations=4)
    text = str(err.value)
    for name in ("top_k:", "loss_type:", "report_to:", "no_such_field:",
                 "per_device_train_batch_size:"):
        assert name in text, text
    assert "5 field(s)" in text and "use temperature" in text


def test_report_to_sets_the_jobs_trackers(tmp_path):
    cfg = GRPOConfig(output_dir=str(tmp_path), report_to=["tensorboard"], max_steps=1)
    trainer = GRPOTrainer(model="nano", reward_funcs=lambda completions, **kw: [0.0],
                          args=cfg, train_dataset=[{"prompt": "hi"}])
    job = JobConfig.model_validate(trainer.job_config())
    assert [t.type for t in job.observability.trackers] == ["tensorboard"]
    assert (tmp_path / "workspace" / "job.yaml").is_file()


def test_trainer_arguments_that_cannot_be_honoured_are_named_at_once():
    def multiply(a: int, b: int) -> int:  # no docstring: transformers cannot describe it
        return a * b

    with pytest.raises(ConfigError) as err:
        GRPOTrainer(model="nano", reward_funcs=["no/such-reward-model"],
                    train_dataset=[{"prompt": "hi"}], rollout_func=lambda p, t: {},
                    environment_factory={}, optimizers=(object(), None),
                    tools=[multiply], args=GRPOConfig(reward_weights=[1.0, 2.0]))
    text = str(err.value)
    for name in ("reward_funcs[0]:", "rollout_func:", "environment_factory:", "optimizers:",
                 "tools[multiply]:", "reward_weights:"):
        assert name in text, text


def test_rows_without_a_prompt_are_named():
    with pytest.raises(ConfigError, match="train_dataset row 1 has no 'prompt'"):
        GRPOTrainer(model="nano", reward_funcs=lambda completions, **kw: [0.0],
                    train_dataset=[{"prompt": "a"}, {"question": "b"}])


def test_peft_config_and_eval_rows_reach_the_job(tmp_path):
    peft = pytest.importorskip("peft")
    cfg = GRPOConfig(output_dir=str(tmp_path), max_steps=1, eval_strategy="steps",
                     eval_steps=1, num_generations_eval=2, num_generations=2,
                     per_device_train_batch_size=2)
    trainer = GRPOTrainer(model="nano", reward_funcs=lambda completions, **kw: [0.0],
                          args=cfg, train_dataset=[{"prompt": "hi"}],
                          eval_dataset=[{"prompt": "ho", "answer": "1"}],
                          peft_config=peft.LoraConfig(r=4, lora_alpha=8,
                                                      target_modules=["q_proj"]))
    job = JobConfig.model_validate(trainer.job_config())
    hp = job.hyper_parameters
    assert (hp.lora_rank, hp.lora_alpha, hp.lora_target_modules) == (4, 8, ["q_proj"])
    assert (hp.eval_steps, hp.val_n_rollouts) == (1, 2)
    assert [d.type.value for d in job.datasets] == ["training", "validation"]


class Lamp:
    def reset(self, **kwargs):
        self.on = False

    def switch(self, on: bool) -> str:
        """Switches the lamp.

        Args:
            on: whether it is on afterwards
        """
        self.on = on
        return "ok"

    def get_reward(self):
        return float(self.on)


def test_an_environment_factory_gives_the_job_a_tool_rollout_and_its_reward(tmp_path):
    trainer = GRPOTrainer(model="nano", args=GRPOConfig(output_dir=str(tmp_path), max_steps=1),
                          train_dataset=[{"prompt": [{"role": "user", "content": "light"}]}],
                          environment_factory=Lamp)  # no reward_funcs: the lamp owns it
    assert [s["function"]["name"] for s in trainer.schemas] == ["switch"]
    job = trainer.job_config()
    kinds = [(f["type"], f["name"], f.get("weight")) for f in job["functions"]]
    assert kinds == [("rollout", "tools", None), ("group_reward", "Lamp", 1.0)]
    JobConfig.model_validate(job)


def test_a_rollout_func_and_a_dict_of_environments_are_refused_saying_why():
    with pytest.raises(ConfigError) as err:
        GRPOTrainer(model="nano", reward_funcs=lambda completions, **kw: [0.0],
                    train_dataset=[{"prompt": "hi"}], rollout_func=lambda p, t: {},
                    environment_factory={"lamp": Lamp})
    text = str(err.value)
    assert "rollout_func: TRL trains on the prompt_ids" in text
    assert "AbstractRolloutProcessor" in text and "carry no token ids" in text
    assert "environment_factory: a dict of environments" in text
    with pytest.raises(ConfigError, match="environment_factory: object has no reset"):
        GRPOTrainer(model="nano", reward_funcs=lambda completions, **kw: [0.0],
                    train_dataset=[{"prompt": "hi"}], environment_factory=object)
