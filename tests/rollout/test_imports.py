"""The rollout package is torch-free: `rltune test-functions` and evaluation load it."""

import subprocess
import sys

CODE = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, _Block())
import rltune.rollout.groups, rltune.rollout.harness, rltune.trainer.protocols
import rltune.lifecycle.evaluate
assert not any(m.split(".")[0] in ("torch", "transformers") for m in sys.modules)
print("ok")
"""


def test_rollout_imports_without_torch():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
