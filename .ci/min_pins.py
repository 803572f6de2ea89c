"""Print pip requirements that pin packages to the lowest versions pyproject.toml allows.

Used by ``make test-min``: ``python .ci/min_pins.py transformers tokenizers peft`` prints
``transformers==5.0.0 tokenizers==0.22.1 peft==0.21.0`` (each package's ``>=`` floor in the
``train`` extra), plus the ``pytest*`` requirements of the ``dev`` extra as declared, so the
floors are read from one place and cannot drift. A named package without a ``>=`` floor fails.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pip vendors the same parser
    from pip._vendor import tomli as tomllib


def name_of(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower()


def main(packages: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    train = {name_of(r): r for r in extras["train"]}
    pins = []
    for package in packages:
        req = train.get(package.lower())
        floor = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", req or "")
        if floor is None:
            print(
                f"min_pins: no '>=' floor for {package} in the train extra: {req!r}",
                file=sys.stderr,
            )
            return 1
        pins.append(f"{package}=={floor.group(1)}")
    pins += [r for r in extras["dev"] if name_of(r).startswith("pytest")]
    print(" ".join(f"'{p}'" for p in pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
