"""rltune.config (and the trainer package itself) import without torch: the server and CLI
import them at module load."""

import subprocess
import sys

CODE = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, _Block())
import rltune.config, rltune.trainer, rltune.trainer.optim
from rltune.config import JobConfig, load_job_config_text, load_dataset, EpochSampler
job = load_job_config_text("model: m\\ntraining: {hyper_parameters: {algorithm: dapo}}\\n")
assert job.knobs.dynamic_sampling
assert not any(m.split(".")[0] in ("torch", "transformers") for m in sys.modules)
print("ok")
"""


def test_config_imports_without_torch():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
