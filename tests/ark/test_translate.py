"""Ark job.yaml → rltune JobConfig: what maps, and the errors for what does not."""

from __future__ import annotations

import textwrap

import pytest

from rltune.config import load_job_config
from rltune.sdk.errors import ConfigError

PLUGINS = {
    "rollout.py": """
        from ark_sdk.resources.pipeline_plugin import rollout
        from ark_sdk.types.pipeline_plugin import PluginInstance, Runtime

        @rollout(name="agent", runtime=Runtime(instance=PluginInstance.CPU2MEM8, timeout=90,
                 max_concurrency=32, min_replicas=1, max_replicas=3))
        async def agent(context, proxy, sample):
            return None
        """,
    "graders.py": """
        from ark_sdk.resources.pipeline_plugin import group_grader, single_grader

        @single_grader
        def exact(context, sample, trajectory):
            return 1.0

        @group_grader()
        def judge(context, sample, trajectories):
            return [0.0 for _ in trajectories]

        def plain(context, sample, trajectory):
            return 0.0
        """,
}

JOB = """
name: ark-job
customization_type: GRPO
model_reference: {foundation_model: {name: nano}}
hyperparameters: {batch_size: '4', num_generations: '8', lr: '0.000001', kl_coefficient: '0.001',
  max_new_tokens: '128', num_iterations_per_batch: '2', save_every_n_steps: '10',
  test_every_n_steps: '5', test_num_generations: '2', num_steps: '30', top_p: '1',
  test_top_p: '1', clip_ratio_high: '0.28'}
custom_rl_pipeline:
  graders:
  - {plugin: {name: exact, python_func: 'plugins.graders:exact'}, weight: 0.5}
  - {plugin: {name: judge, python_func: 'plugins.graders:judge', envs: {K: v}}, weight: 2}
  rollout: {plugin: {name: agent, python_func: 'plugins.rollout:agent', envs: {foo: bar}}}
data:
  training_set: {local_files: [./data/train.jsonl]}
  validation_set: {local_files: [./data/val.jsonl]}
save_model_limit: 3
enable_trajectory: true
"""


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "plugins").mkdir()
    for name, text in PLUGINS.items():
        (tmp_path / "plugins" / name).write_text(textwrap.dedent(text))
    return tmp_path


def _load(ws, text):
    (ws / "job.yaml").write_text(text)
    return load_job_config(ws / "job.yaml")


def test_an_ark_job_becomes_an_rltune_job(ws):
    job = _load(ws, JOB)
    hp = job.hyper_parameters
    assert (job.name, job.model.name, hp.algorithm) == ("ark-job", "nano", "grpo")
    assert (hp.batch_size, hp.n_rollouts, hp.learning_rate, hp.kl_loss_coef) == (4, 8, 1e-6,
                                                                                   0.001)
    assert hp.max_length - hp.max_prompt_length == 128
    assert (hp.ppo_epochs, hp.save_steps, hp.save_strategy) == (2, 10, "steps")
    assert (hp.eval_steps, hp.val_n_rollouts, hp.total_steps(100)) == (5, 2, 30)
    assert (hp.save_total_limit, job.knobs.clip_ratio_high) == (3, 0.28)
    ro = job.rollout
    assert ro.fcmodel.classpath == "plugins.rollout:agent" and ro.timeout == 90
    rt = ro.runtime
    assert (rt.cpu, rt.memory_size, rt.concurrency, rt.min_capacity, rt.max_capacity) == (
        2, 8192, 32, 1, 3)
    assert rt.env == {"foo": "bar"}
    assert [(r.name, r.weight) for r in job.rewards] == [("exact", 0.5)]
    assert [(g.name, g.weight, g.runtime.env) for g in job.group_rewards] == [
        ("judge", 2.0, {"K": "v"})]
    assert [d.file_name for d in job.validation_datasets] == ["./data/val.jsonl"]


def test_without_a_rollout_the_single_turn_plugin_runs(ws):
    text = JOB.replace("  rollout: {plugin: {name: agent, python_func: 'plugins.rollout:agent',"
                       " envs: {foo: bar}}}\n", "")
    assert _load(ws, text).rollout.fcmodel.classpath == "rltune.ark.builtin:single_turn"


@pytest.mark.parametrize("pipeline", [False, True], ids=["GRPO-shaped", "PPOPipeline"])
def test_ppo_maps_to_algorithm_ppo(ws, pipeline):
    text = JOB.replace("customization_type: GRPO", "customization_type: PPO")
    if pipeline:
        text = text.replace("  graders:\n", "  type: PPOPipeline\n  graders:\n")
    text = text.replace("max_new_tokens", "gamma: '0.99', critic_warmup_steps: '2',\n  "
                        "max_new_tokens")
    job = _load(ws, text)
    assert job.hyper_parameters.algorithm == "ppo" and job.knobs.advantage_estimator == "gae"
    assert (job.knobs.gamma, job.knobs.critic_warmup_steps) == (0.99, 2)


@pytest.mark.parametrize("ctype, lora", [("FinetuneSft", 0), ("FinetuneLoRA", 16)])
def test_finetune_types_map_to_an_sft_job(ws, ctype, lora):
    text = (f"name: sft\ncustomization_type: {ctype}\n"
            "model_reference: {foundation_model: {name: nano}}\n"
            "hyperparameters: {learning_rate: '0.0001', epoch: '2', seq_len: '512', "
            "batch_size: '4'}\n"
            "data: {training_set: {local_files: [./data/train.jsonl]}}\n")
    job = _load(ws, text)
    hp = job.hyper_parameters
    assert (hp.algorithm, hp.n_epochs, hp.max_length, hp.learning_rate, hp.lora_rank) == \
        ("sft", 2, 512, 1e-4, lora)
    assert job.functions == []


@pytest.mark.parametrize("ctype, lora", [("DPO", 0), ("DPOLoRA", 16)])
def test_dpo_types_map_to_a_dpo_job(ws, ctype, lora):
    text = (f"name: dpo\ncustomization_type: {ctype}\n"
            "model_reference: {foundation_model: {name: nano}}\n"
            "hyperparameters: {learning_rate: '0.00001', epoch: '3', seq_len: '512', "
            "dpo_beta: '0.2', batch_size: '4'}\n"
            "data: {training_set: {local_files: [./data/pairs.jsonl]}}\n")
    job = _load(ws, text)
    hp = job.hyper_parameters
    assert (hp.algorithm, hp.n_epochs, hp.max_length, hp.lora_rank, job.knobs.dpo_beta) == \
        ("dpo", 3, 512, lora, 0.2)
    assert job.functions == [] and hp.max_plugin_failures != 0  # no graders to fail


@pytest.mark.parametrize("change, key", [
    (("lr: '0.000001'", "lr: '0.000001', warmup_step_rate: '0.1'"),
     "hyperparameters.warmup_step_rate"),
    (("customization_type: GRPO", "customization_type: KTO"), "customization_type"),
    (("customization_type: GRPO", "customization_type: DPO"), "custom_rl_pipeline"),
    (("  graders:\n", "  type: PPOPipeline\n  graders:\n"), "custom_rl_pipeline.type"),
    (("customization_type: GRPO", "customization_type: FinetuneSft"), "custom_rl_pipeline"),
    (("{local_files: [./data/train.jsonl]}",
      "{datasets: [{dataset_id: file-1, sample_count: 3}]}"),
     "data.training_set.datasets[0].sample_count"),
    (("{local_files: [./data/train.jsonl]}",
      "{local_files: [a.jsonl], preset_dataset: {dataset_version_id: mmlu, "
      "inject_multiplier: 1}}"), "data.training_set.preset_dataset.dataset_version_id"),
    (("test_top_p: '1'", "test_top_p: '0.5'"), "hyperparameters.test_top_p"),
    (("'plugins.rollout:agent'", "'plugins.graders:exact'"),
     "custom_rl_pipeline.rollout.plugin.python_func"),
])
def test_keys_without_a_counterpart_are_refused_by_name(ws, change, key):
    with pytest.raises(ConfigError) as err:
        _load(ws, JOB.replace(*change))
    assert f"'{key}'" in str(err.value), str(err.value)


def test_a_plugin_without_a_decorator_or_file_is_a_clear_error(ws):
    with pytest.raises(ConfigError, match="no @rollout, @single_grader or @group_grader"):
        _load(ws, JOB.replace("plugins.graders:exact", "plugins.graders:plain"))
    with pytest.raises(ConfigError, match="is not in the workspace"):
        _load(ws, JOB.replace("plugins.graders:exact", "plugins.nothing:exact"))


def test_python_job_objects_translate_the_same(ws, monkeypatch):
    from rltune.ark import install_as_ark_sdk
    from rltune.ark.job import (
        Data,
        FoundationModelReference,
        GRPOPipeline,
        ModelCustomizationJob,
        ModelReference,
        PipelinePluginWrapper,
        TrainingDataset,
    )

    install_as_ark_sdk()
    monkeypatch.syspath_prepend(str(ws))
    from plugins.graders import judge
    from plugins.rollout import agent

    mcj = ModelCustomizationJob(
        name="py", model_reference=ModelReference(
            foundation_model=FoundationModelReference(name="nano")),
        hyperparameters={"num_generations": "4"},
        data=Data(training_set=TrainingDataset(local_files=["d.jsonl"])),
        custom_rl_pipeline=GRPOPipeline(
            graders=[PipelinePluginWrapper(plugin=judge, weight=0.5)],
            rollout=PipelinePluginWrapper(plugin=agent, envs={"a": "b"})))
    job = mcj.to_job_config(ws)
    assert job.rollout.fcmodel.classpath == "plugins.rollout:agent"
    assert job.rollout.runtime.env == {"a": "b"}
    assert [(g.name, g.weight) for g in job.group_rewards] == [("judge", 0.5)]


def test_dataset_rows_keep_extra_and_thinking_for_the_rollout():
    from rltune.config.data import parse_rows
    from rltune.gateway.protocol import ChatCompletionRequest

    row = parse_rows(['{"messages": [{"role": "user", "content": "q"}], '
                      '"extra": {"answer": "4", "prompt_id": "p1"}, '
                      '"thinking": {"type": "enabled"}}'])[0]
    assert row.ground_truth == "4"  # from extra.answer when rollout_extra has none
    assert row.forwarded_fields() == {"extra": {"answer": "4", "prompt_id": "p1"},
                                      "thinking": {"type": "enabled"}}
    req = ChatCompletionRequest(messages=[{"role": "user", "content": "q"}],
                                thinking={"type": "disabled"})
    assert req.template_kwargs() == {"enable_thinking": False}
    with pytest.raises(Exception, match="thinking"):
        ChatCompletionRequest(messages=[{"role": "user", "content": "q"}],
                              thinking={"type": "sometimes"})
