"""The SDK and the compatibility layer import on a machine without torch."""

import subprocess
import sys

BLOCK_TORCH = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, _Block())
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit("torch import was not blocked")
"""


def _imports_without_torch(imports: str) -> None:
    code = BLOCK_TORCH + imports + (
        "assert not any(m.split('.')[0] in ('torch', 'transformers') for m in sys.modules)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_sdk_and_reinforcement_import_without_torch():
    _imports_without_torch(
        "import rltune, rltune.sdk, rltune.reinforcement, rltune.sdk.tracing\n"
        "import rltune.reinforcement.component.observability\n"
        "from rltune.reinforcement.component.data.base_data_model import AgentOutput\n"
    )


def test_the_rollout_path_imports_without_torch():
    """`rltune test-functions` and evaluation load the rollout package: it stays torch-free."""
    _imports_without_torch(
        "import rltune.rollout.groups, rltune.rollout.harness, rltune.trainer.protocols\n"
        "import rltune.lifecycle.evaluate\n"
    )
