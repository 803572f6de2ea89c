"""``download_url`` datasets: fetch the JSONL over http(s), with errors that say what failed.

The job server fetches at submit time and stores the file like an upload (rows validated, a
``file-…`` id recorded in the job); ``rltune train`` fetches into ``<job dir>/data/``.

Example:
    >>> local_name("https://example.com/data/train.jsonl?sig=1")
    'train.jsonl'
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rltune.config.datasets import DataSourceType
from rltune.sdk.errors import DatasetError

MAX_BYTES = 1 << 30  # the cloud's dataset size limit (1 GB)
TIMEOUT_S = 60.0


def local_name(url: str) -> str:
    """A file name for the download (the URL's last path part, else ``download.jsonl``)."""
    name = posixpath.basename(urlsplit(url).path)
    return name if name and name not in (".", "..") else "download.jsonl"


def fetch(url: str, *, where: str, max_bytes: int = MAX_BYTES,
          timeout: float = TIMEOUT_S) -> bytes:
    """The body of ``url``; ``DatasetError`` for a bad scheme, an HTTP error, a network
    failure or a body over ``max_bytes``."""
    import httpx

    if urlsplit(url).scheme not in ("http", "https"):
        raise DatasetError(f"download_url {url!r} is not an http(s) URL", where=where,
                           hint="use an http:// or https:// address, or upload the file")
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as resp:
            if resp.status_code >= 400:
                raise DatasetError(f"downloading {url} failed: HTTP {resp.status_code} "
                                   f"{resp.reason_phrase}", where=where,
                                   hint="check the URL (signed URLs expire) and that the "
                                        "server can reach it")
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise DatasetError(f"{url} is larger than {max_bytes} bytes", where=where,
                                       hint="split the dataset into smaller files")
            return bytes(body)
    except httpx.HTTPError as exc:
        raise DatasetError(f"downloading {url} failed: {type(exc).__name__}: {exc}",
                           where=where, hint="check the URL and the network") from None


def download_to_files(job: Any, dest: Path) -> Any:
    """A copy of ``job`` whose ``download_url`` datasets are local files under ``dest``."""
    fixed = []
    for i, ds in enumerate(job.datasets):
        if ds.data_source_type is DataSourceType.DOWNLOAD_URL:
            body = fetch(ds.download_url, where=f"datasets[{i}].download_url")
            dest.mkdir(parents=True, exist_ok=True)
            path = dest / f"{i}-{local_name(ds.download_url)}"
            path.write_bytes(body)
            ds = ds.model_copy(update={"data_source_type": DataSourceType.FILE_ID,
                                       "file_name": str(path)})
        fixed.append(ds)
    return job.model_copy(update={"datasets": fixed})
