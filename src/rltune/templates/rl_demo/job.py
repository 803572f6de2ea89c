"""The same job as job.yaml, as Ark's Python objects: `python -m rltune.ark job.py` trains it
here (the module runner serves the `ark_sdk` imports)."""

from ark_sdk.resources.model_customization_job import ModelCustomizationJob
from ark_sdk.resources.pipeline_plugin import GRPOPipeline, PipelinePluginWrapper
from ark_sdk.types.model_customization_job import (
    CustomizationType,
    Data,
    FoundationModelReference,
    ModelReference,
    TrainingDataset,
    ValidationDataset,
)
from plugins.answered_grader import answered_grader
from plugins.calc_rollout import calc_rollout
from plugins.exact_grader import exact_grader

if __name__ == "__main__":
    mcj = ModelCustomizationJob(
        name="rl-demo",
        customization_type=CustomizationType.GRPO,
        model_reference=ModelReference(foundation_model=FoundationModelReference(name="nano")),
        hyperparameters={"batch_size": "8", "num_generations": "8", "lr": "0.0002",
                         "kl_coefficient": "0.0", "max_new_tokens": "56",
                         "max_prompt_length": "200", "ppo_mini_batch_size": "32",
                         "test_every_n_steps": "5", "test_num_generations": "4",
                         "num_steps": "20"},
        data=Data(training_set=TrainingDataset(local_files=["./data/train.jsonl"]),
                  validation_set=ValidationDataset(local_files=["./data/val.jsonl"])),
        custom_rl_pipeline=GRPOPipeline(
            graders=[PipelinePluginWrapper(plugin=exact_grader, weight=1.0),
                     PipelinePluginWrapper(plugin=answered_grader, weight=1.0)],
            rollout=PipelinePluginWrapper(plugin=calc_rollout, envs={"MAX_TURNS": "3"}),
        ),
        enable_trajectory=True,
    )
    mcj.submit()
    print(f"Job finished. outputs at {mcj.url}")
