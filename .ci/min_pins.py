"""Print pip requirements that pin packages to the lowest versions pyproject.toml allows.

Used by ``make test-min`` (the CI floors job): ``python .ci/min_pins.py`` prints one
``name==floor`` pin for EVERY runtime dependency of rltune's base install and of the
``serve``, ``train``, ``data`` and ``demo`` extras (each requirement's ``>=`` floor as
declared), plus
the ``pytest*`` requirements of the ``dev`` extra as declared, so the floors are read from one
place and cannot drift. Named packages (``python .ci/min_pins.py transformers peft``) pin only
those. A runtime requirement without a ``>=`` floor fails: every floor is tested.

torch is the one exception (``HELD``): pip's torch wheels for Linux are CUDA builds of several
GB, so the floors venv keeps the CPU wheel CI installs first (Makefile ``TORCH_CPU``).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pip vendors the same parser
    from pip._vendor import tomli as tomllib

RUNTIME_EXTRAS = ("serve", "train", "data", "demo")
HELD = {"torch"}


def name_of(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower()


def pin_of(req: str) -> str | None:
    """``name>=1.2,<2; marker`` → ``name==1.2; marker``; None without a ``>=`` floor."""
    floor = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", req.split(";")[0])
    if floor is None:
        return None
    marker = f"; {req.split(';', 1)[1].strip()}" if ";" in req else ""
    return f"{name_of(req)}=={floor.group(1)}{marker}"


def runtime_requirements(project: dict) -> list[str]:
    extras = project["optional-dependencies"]
    reqs = list(project["dependencies"])
    for extra in RUNTIME_EXTRAS:
        reqs += [r for r in extras[extra] if name_of(r) != "rltune"]
    return reqs


def main(packages: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    runtime = {name_of(r): r for r in runtime_requirements(project)}
    wanted = [p.lower() for p in packages] or [n for n in runtime if n not in HELD]
    pins = []
    for package in wanted:
        pin = pin_of(runtime.get(package, ""))
        if pin is None:
            print(f"min_pins: no '>=' floor for {package} in the runtime requirements: "
                  f"{runtime.get(package)!r}", file=sys.stderr)
            return 1
        pins.append(pin)
    pins += [r for r in project["optional-dependencies"]["dev"]
             if name_of(r).startswith("pytest")]
    print(shlex.join(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
