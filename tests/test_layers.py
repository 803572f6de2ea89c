"""No import runs up the layers: every ``rltune`` module's imports (top level and inside
functions) are read with ``ast`` and each must name its own layer or a lower one.

The layers, bottom to top (a package may import its own layer and those below it):

 0. ``sdk``: user-facing types; imports nothing else of rltune.
 1. ground floor: ``errors``, ``_process``, ``_lazy``, ``_alias``, ``_ray``, ``_fastapi``,
    ``paths``, ``jobdir``, ``names``, ``modelcodes``, ``safefs`` (plumbing and the name
    lists). A new package or top-level module fails the test until it is given a layer here.
 2. ``config``: the job schema, and below it ``config/compat`` (the compatibility boundary:
    Volcano Ark's job.yaml, TRL's and verl's names and YAML, turned into the core schema).
 3. cloud adapters ``ark``, ``reinforcement``: the clouds' names and module paths over sdk and
    config. They sit below ``functions`` because function workers install their import
    aliases; ``ark``'s ``submit()`` runs ``rltune train`` as a child process instead of
    importing the trainer.
 4. ``observability``: trackers, tracing and spans, used by function workers, the gateway
    and the trainer.
 5. ``functions``: function workers, pools, backends (and the Ray helpers the engine's Ray
    replicas use).
 6. ``engine``: inference engines.
 7. ``models``: the model registry and demo-model builds (the warm start runs on the
    engine's transformers compatibility layer).
 8. ``gateway``: the policy server over an engine.
 9. ``rollout``: rollouts -> scored groups (torch-free), used by the trainer and evaluation.
10. ``trainer``.
11. ``lifecycle``: publish, export, deploy, evaluate.
12. ``console``: the web console's static files and helpers.
13. ``server``: the job server (it serves the console).
14. ``client``, ``templates``, ``trl``: the REST client, the workspace templates and TRL's
    ``GRPOTrainer`` names (``rltune.trl``, which runs the trainer in process).
15. ``cli``.

This differs from the first sketch (models below engine, console above server) where the code's
real dependencies run the other way: see the notes at 3, 7 and 13.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rltune"

LAYERS: list[tuple[str, ...]] = [
    ("sdk",),
    ("errors", "_process", "_lazy", "_alias", "_ray", "_fastapi", "paths", "jobdir", "names",
     "modelcodes", "safefs"),
    ("config",),
    ("ark", "reinforcement"),
    ("observability", "doctor"),
    ("functions",),
    ("engine",),
    ("models",),
    ("gateway",),
    ("rollout",),
    ("trainer",),
    ("lifecycle",),
    ("console",),
    ("server",),
    ("client", "templates", "trl"),
    ("cli",),
]
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}

def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        if rel.parts[1:2] == ("templates",) and len(rel.parts) > 3:
            continue  # a template's workspace is user code, not rltune's
        name = ".".join(rel.parts).removesuffix(".__init__")
        out.append((name, path))
    return out


def _is_module(name: str) -> bool:
    return (SRC / name).is_dir() or (SRC / f"{name}.py").is_file()


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "rltune" else None


def _imported(module: str, path: Path) -> set[str]:
    """Every rltune module ``module`` imports (``from rltune import x`` counts as ``x``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base == "rltune":  # a submodule, or a name of rltune/__init__.py (the SDK's)
                names.update(f"rltune.{a.name}" if _is_module(a.name) else "rltune"
                             for a in node.names)
            else:
                names.add(base)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", None)) == "import_module" and node.args and isinstance(
                node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)
    return {n for n in names if n.startswith("rltune.")}


def _up_imports() -> list[tuple[str, str, str]]:
    found = []
    for module, path in _modules():
        unit = _unit(module)
        if unit is None:
            continue  # rltune/__init__.py: the package's face (the SDK, the lazy client)
        assert unit in LAYER_OF, f"{module}: package {unit!r} has no layer; add it to LAYERS"
        for target in sorted(_imported(module, path)):
            other = _unit(target)
            if other is None or other == unit:
                continue
            assert other in LAYER_OF, f"{module} imports {target}: add {other!r} to LAYERS"
            if LAYER_OF[other] > LAYER_OF[unit]:
                found.append((module, other, target))
    return found


def test_no_import_runs_up_the_layers():
    bad = [f"{m} (layer {LAYER_OF[_unit(m)]}) imports {t} (layer {LAYER_OF[o]})"
           for m, o, t in _up_imports()]
    assert not bad, "imports up the layers:\n" + "\n".join(bad)


def test_the_checker_sees_an_up_import(tmp_path):
    """The scan catches all three spellings of an import (the test can fail)."""
    path = tmp_path / "mod.py"
    path.write_text("import rltune.trainer.loop\nfrom rltune import server, __version__\n"
                    "def f():\n    from ..cli import main\n")
    assert _imported("rltune.config.mod", path) == {
        "rltune.trainer.loop", "rltune.server", "rltune.cli"}
