"""Workspace templates (``rltune init workspace DIR --template NAME``)."""

from pathlib import Path

TEMPLATES_DIR = Path(__file__).parent


def available() -> list[str]:
    """Names of the shipped templates."""
    return sorted(p.name for p in TEMPLATES_DIR.iterdir() if (p / "functions").is_dir())
