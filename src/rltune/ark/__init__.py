"""Volcano Ark's RL plugin interface (``ark_sdk``; docs/ark.md) on rltune.

Ark rollout and grader plugins run unchanged: function workers install
:func:`install_as_ark_sdk`, which makes ``ark_sdk.resources.pipeline_plugin``,
``ark_sdk.types…`` and ``ark_sdk.core.plugin.rollout.proxy`` resolve to this package; an Ark
``job.yaml`` is translated into an rltune job config when loaded
(:mod:`rltune.config.compat.ark_job`).
See docs/ark.md.
"""

from __future__ import annotations

from rltune.ark.alias import install_as_ark_sdk, uninstall_ark_sdk_alias

__all__ = ["install_as_ark_sdk", "uninstall_ark_sdk_alias"]
