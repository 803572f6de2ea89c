"""Checks a command makes before anything slow (loading weights, starting a server, building a
run folder), so that a busy port or a missing dataset is a usage error (exit 2) in well under a
second instead of a failure after the work began.

Example:
    >>> import socket
    >>> with socket.socket() as s:
    ...     s.bind(("127.0.0.1", 0)); s.listen(1)
    ...     try:
    ...         check_port_free("127.0.0.1", s.getsockname()[1])
    ...     except Exception as exc:
    ...         print(type(exc).__name__, exc.where)
    ValidationError --port
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rltune.sdk.errors import DatasetError, ValidationError


def check_port_free(host: str, port: int, option: str = "--port") -> None:
    """A ``ValidationError`` naming ``option`` when something listens on ``host:port`` already
    (port 0, a free port picked at bind time, always passes)."""
    if not port:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # the same option uvicorn binds with: a port in TIME_WAIT is free, a listener is not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ValidationError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}", where=option,
                hint=f"stop what uses port {port}, or pick another with {option} "
                     f"({option} 0 picks a free one)") from None


def check_dataset_files(datasets: Iterable[Any], resolve: Callable[[str], Path],
                        where: str = "datasets") -> None:
    """A ``DatasetError`` for the first dataset whose local ``file_name`` does not exist
    (``resolve`` makes a file_name a path the way the command will read it); uploaded
    ``file_id`` and ``download_url`` datasets are not checked here."""
    for i, ds in enumerate(datasets):
        source = getattr(getattr(ds, "data_source_type", None), "value", "file_id")
        if source != "file_id" or not ds.file_name:
            continue
        path = resolve(ds.file_name)
        if not path.exists():
            raise DatasetError(f"dataset file not found: {path}",
                               where=f"{where}[{i}].file_name",
                               hint="check file_name in the job's datasets (the path above "
                                    "is where it was looked for)")


def check_files(paths: Iterable[str], option: str) -> None:
    """A ``DatasetError`` naming ``option`` for the first of ``paths`` that is not a file."""
    for name in paths:
        if not Path(name).expanduser().is_file():
            raise DatasetError(f"{option} {name}: no such file", where=option,
                               hint="give the path of a JSONL dataset file")
