"""Read an Ark plugin's decorator from its source file with ``ast`` (no import, no user code
runs): its kind, name and literal ``runtime=Runtime(...)`` values; and Ark's instance sizes
(``PluginInstance``, also ``ark_sdk.types``'s), which the job translation maps to worker limits.

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp()); (root / "plugins").mkdir()
    >>> _ = (root / "plugins" / "g.py").write_text(
    ...     "@group_grader(name='judge', runtime=Runtime(instance=PluginInstance.CPU2MEM4,\\n"
    ...     "    timeout=60))\\ndef grade(context, sample, trajectories):\\n    return []\\n")
    >>> p = find_plugin("plugins.g:grade", root)
    >>> p.kind, p.name, p.runtime
    ('group_grader', 'judge', {'instance': 'CPU2MEM4', 'timeout': 60})
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.errors import ConfigError, UserCodeError
from rltune.sdk.loader import parse_classpath

KINDS = ("rollout", "single_grader", "group_grader")


class PluginInstance(str, Enum):
    """Ark's instance sizes (CPU cores, memory GB); rltune maps them to worker limits."""

    CPU1MEM2 = "CPU1MEM2"
    CPU1MEM4 = "CPU1MEM4"
    CPU1MEM8 = "CPU1MEM8"
    CPU2MEM4 = "CPU2MEM4"
    CPU2MEM8 = "CPU2MEM8"
    CPU2MEM16 = "CPU2MEM16"
    CPU4MEM8 = "CPU4MEM8"
    CPU4MEM16 = "CPU4MEM16"
    CPU4MEM32 = "CPU4MEM32"
    CPU8MEM16 = "CPU8MEM16"
    CPU8MEM32 = "CPU8MEM32"
    CPU8MEM64 = "CPU8MEM64"
    CPU16MEM32 = "CPU16MEM32"
    CPU16MEM64 = "CPU16MEM64"
    CPU16MEM128 = "CPU16MEM128"

    @property
    def cpu(self) -> int:
        return int(self.value[3:].split("MEM")[0])

    @property
    def memory_mb(self) -> int:
        return int(self.value.split("MEM")[1]) * 1024


@dataclass
class PluginSource:
    kind: str
    name: str
    runtime: dict[str, Any] = field(default_factory=dict)


def _decorator_name(node: ast.expr) -> Optional[str]:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _literal(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "PluginInstance":
        return node.attr
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ConfigError(f"runtime value {ast.unparse(node)!r} is not a literal",
                          where=where, hint="write literal values in Runtime(...)") from None


def _runtime(call: ast.Call, where: str) -> dict[str, Any]:
    for kw in call.keywords:
        if kw.arg != "runtime":
            continue
        node = kw.value
        if not (isinstance(node, ast.Call) and _decorator_name(node) == "Runtime"):
            raise ConfigError("runtime= must be written as Runtime(...) in the decorator",
                              where=where, hint="runtime=Runtime(timeout=300, ...)")
        return {k.arg: _literal(k.value, where) for k in node.keywords if k.arg}
    return {}


def _module_file(python_func: str, root: Path, where: str) -> tuple[Path, str]:
    try:
        cp = parse_classpath(python_func)
    except UserCodeError as exc:
        raise ConfigError(f"python_func {python_func!r}: {exc.message}", where=where,
                          hint="write python_func: plugins.my_module:my_function") from None
    candidates = [root / cp.relative_file]
    if cp.module:
        candidates.append(root / cp.module.replace(".", "/") / "__init__.py")
    for path in candidates:
        if path.is_file():
            return path, cp.class_name
    raise ConfigError(f"python_func {python_func!r}: {cp.relative_file} is not in the "
                      f"workspace {root}", where=where,
                      hint="give the module relative to the folder of the job file")


def find_plugin(python_func: str, root: str | Path, *, where: str = "python_func"
                ) -> PluginSource:
    """The decorator of ``module:function`` under ``root``, or a ``ConfigError``."""
    path, func = _module_file(python_func, Path(root), where)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(f"{path.name}:{exc.lineno}: {exc.msg}", where=where,
                          hint="fix the syntax error") from None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == func:
            for deco in node.decorator_list:
                kind = _decorator_name(deco)
                if kind in KINDS:
                    name = func
                    runtime: dict[str, Any] = {}
                    if isinstance(deco, ast.Call):
                        for kw in deco.keywords:
                            if kw.arg == "name":
                                name = str(_literal(kw.value, where))
                        runtime = _runtime(deco, where)
                    return PluginSource(kind=kind, name=name, runtime=runtime)
            raise ConfigError(f"{func} in {path.name} has no @rollout, @single_grader or "
                              "@group_grader decorator", where=where,
                              hint="an Ark plugin must be decorated (Ark rejects it too)")
    raise ConfigError(f"no function {func} in {path.name}", where=where,
                      hint="check the name after ':' in python_func")
