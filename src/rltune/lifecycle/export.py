"""Export a published model: a merged Hugging Face folder, or the LoRA adapter alone.

Published folders already hold merged weights (``config.json``, ``model.safetensors``,
tokenizer files) and, for LoRA, ``adapter/`` (peft's ``adapter_config.json`` and weights).

Example:
    >>> export_dir("/nonexistent", "/tmp/x", "adapter")      # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from rltune.lifecycle.publish import ADAPTER_DIR, has_adapter
from rltune.sdk.errors import ConflictError, ValidationError

PARTS = ("merged", "adapter")


def model_files(model_dir: str | Path) -> list[dict]:
    root = Path(model_dir)
    return [{"path": str(p.relative_to(root)), "bytes": p.stat().st_size}
            for p in sorted(root.rglob("*")) if p.is_file()]


def _source(model_dir: Path, part: str) -> tuple[Path, set[str]]:
    """(folder to take, names to leave out)."""
    if part not in PARTS:
        raise ValidationError(f"export part {part!r} is unknown", where="part",
                              hint="use merged or adapter")
    if part == "adapter":
        if not has_adapter(model_dir):
            raise ValidationError("the model is a full fine-tune: it has no LoRA adapter",
                                  where="part", hint="export part=merged")
        return model_dir / ADAPTER_DIR, set()
    return model_dir, {ADAPTER_DIR, "rltune_model.json"}


def check_part(model_dir: str | Path, part: str) -> None:
    """Raise ``ValidationError`` when ``part`` cannot be exported from this model."""
    _source(Path(model_dir), part)


def export_dir(model_dir: str | Path, out: str | Path, part: str = "merged") -> Path:
    """Copy ``part`` of a published model into the new folder ``out``."""
    src, skip = _source(Path(model_dir), part)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConflictError(f"{out} exists and is not empty", where=str(out),
                            hint="choose a new folder")
    shutil.copytree(src, out, ignore=lambda d, names: [n for n in names
                                                       if Path(d) == src and n in skip],
                    dirs_exist_ok=True)
    return out


def export_archive(model_dir: str | Path, part: str, name: str) -> Path:
    """A temporary ``.tar.gz`` of ``part`` with the files under ``<name>/`` (caller deletes)."""
    src, skip = _source(Path(model_dir), part)
    fd, tmp = tempfile.mkstemp(suffix=".tar.gz", prefix="rltune-export-")
    with open(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz") as tar:
        for item in sorted(src.iterdir()):
            if item.name not in skip:
                tar.add(item, arcname=f"{name}/{item.name}")
    return Path(tmp)
