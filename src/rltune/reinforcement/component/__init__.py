"""``…reinforcement.component``: processors and data models under the cloud SDK's path."""

from rltune.reinforcement.component.processor import (
    AbstractGroupRewardProcessor,
    AbstractProcessor,
    AbstractRewardProcessor,
    AbstractRolloutProcessor,
)

__all__ = [
    "AbstractGroupRewardProcessor",
    "AbstractProcessor",
    "AbstractRewardProcessor",
    "AbstractRolloutProcessor",
]
