"""``python -m rltune.ark job.py``: a bad job definition prints what is wrong, not a traceback
(issue 30, item 17)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAD = """
from ark_sdk.resources.model_customization_job import ModelCustomizationJob
from ark_sdk.types.model_customization_job import (
    CustomizationType, Data, FoundationModelReference, ModelReference, TrainingDataset)
ref = ModelReference(foundation_model=FoundationModelReference(name="nano"))
"""


def _run(tmp_path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "job.py").write_text(HEAD + textwrap.dedent(body))
    return subprocess.run([sys.executable, "-m", "rltune.ark", "job.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_a_job_without_data_is_a_clear_error(tmp_path):
    proc = _run(tmp_path, """
        ModelCustomizationJob(name="x", customization_type=CustomizationType.GRPO,
                              model_reference=ref).submit()
    """)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "ModelCustomizationJob.data: Field required" in proc.stderr


def test_a_job_rltune_refuses_is_one_line_naming_the_key(tmp_path):
    proc = _run(tmp_path, """
        ModelCustomizationJob(name="x", customization_type=CustomizationType.GRPO,
                              model_reference=ref,
                              data=Data(training_set=TrainingDataset(local_files=[]))).submit()
    """)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and "Ark job key 'custom_rl_pipeline'" in proc.stderr


def test_a_bad_hyper_parameter_value_is_named_before_missing_keys(tmp_path):
    """Issue 37 item 11: ``num_steps: 'zz'`` names ``num_steps`` (the job also lacks its
    pipeline: the bad value is what the user typed, so it is reported first)."""
    proc = _run(tmp_path, """
        ModelCustomizationJob(name="x", customization_type=CustomizationType.GRPO,
                              model_reference=ref, hyperparameters={"num_steps": "zz"},
                              data=Data(training_set=TrainingDataset(local_files=[]))).submit()
    """)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "hyperparameters.num_steps" in proc.stderr and "'zz'" in proc.stderr, proc.stderr
    assert "custom_rl_pipeline" not in proc.stderr
