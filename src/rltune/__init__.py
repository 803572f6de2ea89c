"""rltune: self-hosted reinforcement-learning fine-tuning of LLM agents.

The user SDK is re-exported here, so ``from rltune import AbstractRolloutProcessor`` works.
"""

from rltune.sdk import *  # noqa: F403
from rltune.sdk import __all__ as _sdk_all

__version__ = "0.1.0"
__all__ = [*_sdk_all, "AgenticRL", "__version__"]  # noqa: F405 - AgenticRL is lazy


def __getattr__(name: str):
    # Lazy: `import rltune` must not pull httpx and the client for users of the SDK types.
    if name == "AgenticRL":
        from rltune.client.agentic_rl import AgenticRL

        return AgenticRL
    raise AttributeError(f"module 'rltune' has no attribute {name!r}")
