"""Make ``import ark_sdk…`` resolve to rltune, so Volcano Ark plugin code runs unchanged.

Like :func:`rltune.reinforcement.install_as_dashscope`: an explicit call (function workers make
it at start) that never shadows a real ``ark_sdk`` installation unless ``force=True``. Each Ark
module path (the table in docs/ark.md) is a module whose names are rltune's own objects.

Example:
    >>> install_as_ark_sdk()
    True
    >>> from ark_sdk.types.pipeline_plugin.rollout import PluginStatus
    >>> PluginStatus.__module__
    'rltune.ark.types'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
from types import ModuleType

from rltune._alias import ImportAlias

_PLUGIN = ("rltune.ark.plugins", ["rollout", "single_grader", "group_grader"])
_PIPELINE = ("rltune.ark.job", ["GRPOPipeline", "PPOPipeline", "PipelinePluginWrapper"])
_TYPES = ("rltune.ark.types", None)
_PROXY_TYPE = ("rltune.ark.proxy", ["RolloutInferenceProxy", "InferenceProxy"])

#: Ark module → the (rltune module, names or None for its ``__all__``) it is made of.
MODULES: dict[str, list[tuple[str, list[str] | None]]] = {
    "ark_sdk.resources.pipeline_plugin": [_PLUGIN, _PIPELINE],
    "ark_sdk.resources.model_customization_job": [("rltune.ark.job",
                                                   ["ModelCustomizationJob"])],
    "ark_sdk.types.model_customization_job": [("rltune.ark.job", None)],
    "ark_sdk.types.pipeline_plugin": [_TYPES, _PROXY_TYPE],
    "ark_sdk.types.pipeline_plugin.pipeline_plugin": [_TYPES],
    "ark_sdk.types.pipeline_plugin.rollout": [_TYPES, _PROXY_TYPE],
    "ark_sdk.core.plugin.rollout.proxy": [("rltune.ark.proxy", None)],
    "ark_sdk.core.plugin.rollout.trace": [("rltune.ark.trace", None)],
    # The online test needs the job server's REST client (a layer above this one): loaded
    # only when a script imports this path, never by a function worker.
    "ark_sdk.resources.pipeline_plugin.test_instance": [(
        "rltune.client.ark_test_instance",
        ["get_or_create_pipeline_plugin_test_instance", "PipelinePluginTestInstance"])],
}
_PACKAGES = {".".join(name.split(".")[:i]) for name in MODULES
             for i in range(1, name.count(".") + 1)}


class _ArkFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[override]
        if fullname in MODULES or fullname in _PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # type: ignore[override]
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__doc__ = "Ark SDK path served by rltune (rltune.ark.install_as_ark_sdk)."
        for source, names in MODULES.get(module.__name__, []):
            real = importlib.import_module(source)
            for name in names if names is not None else real.__all__:
                setattr(module, name, getattr(real, name))


_ALIAS = ImportAlias("ark_sdk", _ArkFinder())


def install_as_ark_sdk(force: bool = False) -> bool:
    """Install the alias; False (nothing changed) when a real ``ark_sdk`` is importable."""
    return _ALIAS.install(force)


def uninstall_ark_sdk_alias() -> None:
    """Remove the alias and forget the aliased modules (mainly for tests)."""
    _ALIAS.uninstall()
