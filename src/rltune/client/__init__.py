"""rltune.client: the ``AgenticRL`` SDK client (REST to the job server).

Also importable as ``dashscope.finetune.agentic_rl`` after
``rltune.reinforcement.install_as_dashscope()``.
"""

from rltune.client.agentic_rl import AgenticRL
from rltune.client.models import FineTune, FineTuneOutput

__all__ = ["AgenticRL", "FineTune", "FineTuneOutput"]
