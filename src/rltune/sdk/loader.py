"""Load a user's processor class from a classpath inside a workspace.

Accepted forms: ``pkg.mod.Class``, ``pkg.mod:Class`` and ``path/to/file.py:Class`` (the
``.py`` may be omitted), all relative to the workspace root, which is put on ``sys.path``.
The name may also be a plugin function that carries its processor class in
``__rltune_processor__`` (Volcano Ark's ``@rollout`` / ``@single_grader`` / ``@group_grader``).

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "echo.py").write_text(
    ...     "from rltune.sdk import AbstractRolloutProcessor\\n"
    ...     "class Echo(AbstractRolloutProcessor):\\n"
    ...     "    async def process(self, input_data):\\n"
    ...     "        return None\\n")
    >>> load_processor_class("echo.py:Echo", root).__name__
    'Echo'
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from rltune.sdk.errors import UserCodeError
from rltune.sdk.processors import AbstractProcessor


@dataclass(frozen=True)
class Classpath:
    """A parsed classpath: either ``module`` (dotted) or ``file`` (a path), plus the class."""

    raw: str
    class_name: str
    module: str | None = None
    file: str | None = None

    @property
    def module_name(self) -> str:
        """The dotted module the class lives in (a file path turned into dotted form)."""
        if self.module:
            return self.module
        assert self.file is not None
        return self.file[: -len(".py")].replace("/", ".").replace("\\", ".")

    @property
    def relative_file(self) -> str:
        """The source file relative to the workspace root."""
        if self.file:
            return self.file
        assert self.module is not None
        return self.module.replace(".", "/") + ".py"


def parse_classpath(classpath: str) -> Classpath:
    """Split a classpath into module or file and class name, or say what form is expected."""
    text = (classpath or "").strip()
    hint = "use 'pkg.module.Class', 'pkg.module:Class' or 'path/to/file.py:Class'"
    if not text:
        raise UserCodeError("empty classpath", hint=hint)
    if ":" in text:
        target, _, cls = text.rpartition(":")
        if not target or not cls.isidentifier():
            raise UserCodeError(f"malformed classpath {text!r}", hint=hint)
        if "/" in target or "\\" in target or target.endswith(".py"):
            file = target if target.endswith(".py") else target + ".py"
            return Classpath(raw=text, class_name=cls, file=file.replace("\\", "/"))
        return Classpath(raw=text, class_name=cls, module=target)
    module, _, cls = text.rpartition(".")
    if not module or not cls.isidentifier():
        raise UserCodeError(f"classpath {text!r} names no module", hint=hint)
    return Classpath(raw=text, class_name=cls, module=module)


def _import_from_file(path: Path, module_name: str) -> object:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot create an import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def load_processor_class(classpath: str, workspace: str | Path | None = None,
                         func_type: object = "reward") -> type:
    """Import the class named by ``classpath`` and check that it is a processor.

    A plain TRL or verl reward function is wrapped as one (``rltune.sdk.plain``).
    """
    cp = parse_classpath(classpath)
    root = Path(workspace or ".").resolve()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    rel = cp.relative_file
    where = f"{rel} (workspace {root})"
    try:
        if cp.file is not None:
            path = (root / cp.file).resolve()
            if not path.is_file():
                raise UserCodeError(
                    f"file {cp.file} does not exist",
                    where=str(root),
                    hint="give the path relative to the workspace root",
                )
            module = _import_from_file(path, cp.module_name)
        else:
            module = importlib.import_module(cp.module)  # type: ignore[arg-type]
    except UserCodeError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and cp.module_name.startswith(exc.name):
            raise UserCodeError(
                f"module {cp.module_name} not found (no {rel})",
                where=str(root),
                hint="check the classpath and that the file is inside the workspace",
            ) from exc
        raise UserCodeError(
            f"importing {cp.module_name} failed:\n{traceback.format_exc()}",
            where=where,
            hint=f"install the missing package {exc.name!r} or add it to requirements.txt",
        ) from exc
    except Exception as exc:
        raise UserCodeError(
            f"importing {cp.module_name} failed:\n{traceback.format_exc()}", where=where
        ) from exc
    cls = getattr(module, cp.class_name, None)
    if cls is None:
        found = sorted(
            n
            for n, v in vars(module).items()
            if isinstance(v, type)
            and issubclass(v, AbstractProcessor)
            and v.__module__ == getattr(module, "__name__", None)
        )
        raise UserCodeError(
            f"class {cp.class_name} not found in {rel}",
            where=where,
            hint=f"processor classes defined there: {found or 'none'}",
        )
    # A decorated plugin function (e.g. Volcano Ark's @rollout) names the class serving it.
    cls = getattr(cls, "__rltune_processor__", cls)
    if inspect.isfunction(cls):
        from rltune.sdk.plain import processor_for_function

        try:
            return processor_for_function(cls, func_type)
        except UserCodeError as exc:
            raise UserCodeError(exc.message, where=where, hint=exc.hint) from None
    if not (isinstance(cls, type) and issubclass(cls, AbstractProcessor)):
        raise UserCodeError(
            f"{cp.class_name} in {rel} is not a processor",
            where=where,
            hint="subclass AbstractRolloutProcessor, AbstractRewardProcessor or "
            "AbstractGroupRewardProcessor",
        )
    return cls


__all__ = ["load_processor_class", "parse_classpath"]
