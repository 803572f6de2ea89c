"""rltune: self-hosted reinforcement-learning fine-tuning of LLM agents.

The user SDK is re-exported here, so ``from rltune import AbstractRolloutProcessor`` works.
"""

from rltune._lazy import lazy_getattr
from rltune.sdk import *  # noqa: F403
from rltune.sdk import __all__ as _sdk_all

__version__ = "0.1.0"
__all__ = [*_sdk_all, "AgenticRL", "__version__"]  # noqa: F405 - AgenticRL is lazy

# Lazy: `import rltune` must not pull httpx and the client for users of the SDK types.
__getattr__ = lazy_getattr(__name__, {"AgenticRL": "rltune.client.agentic_rl"})
