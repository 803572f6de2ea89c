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


def test_sdk_and_reinforcement_import_without_torch():
    code = BLOCK_TORCH + (
        "import rltune, rltune.sdk, rltune.reinforcement, rltune.sdk.tracing\n"
        "import rltune.reinforcement.component.observability\n"
        "from rltune.reinforcement.component.data.base_data_model import AgentOutput\n"
        "assert not any(m.startswith('torch') for m in sys.modules)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
