"""``download_url`` datasets: fetch the JSONL over http(s), or from an S3-compatible store
(``s3://bucket/key``: Ark's ``tos_bucket`` / ``tos_paths``), with errors that say what failed.

``s3://`` is read with ``fsspec``/``s3fs`` (``pip install 'rltune[s3]'``); the store is the one
the environment names: ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (Volcano TOS:
``https://tos-s3-cn-beijing.volces.com``, MinIO, …) with the usual ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``. On the job server these are the operator's, so ``s3://`` is read
there only from the buckets (or prefixes) the operator gave the caller's workspace
(``rltune.config.s3grants``), refused before any request otherwise, and the endpoint must be an
address the server's address policy allows (a private MinIO: add its network to
``RLTUNE_URL_ALLOW_NETWORKS``). ``rltune train`` reads any bucket with the user's own keys.

The job server fetches at submit time and stores the file like an upload (rows validated, a
``file-…`` id recorded in the job); ``rltune train`` fetches into ``<job dir>/data/``.

Example:
    >>> local_name("https://example.com/data/train.jsonl?sig=1")
    'train.jsonl'
"""

from __future__ import annotations

import posixpath
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from rltune.config.datasets import DataSourceType
from rltune.config.netguard import AddressPolicy
from rltune.config.s3grants import S3Grants
from rltune.sdk.errors import DatasetError

MAX_BYTES = 1 << 30  # the cloud's dataset size limit (1 GB)
TIMEOUT_S = 60.0  # connecting, and the longest wait for the next bytes
#: The whole download, redirects included, ends within this many seconds.
DEADLINE_S = 600.0
#: After the first ``RATE_GRACE_S`` seconds, a download averaging less than this is stopped.
MIN_RATE_BPS, RATE_GRACE_S = 16 * 1024, 10.0
MAX_REDIRECTS = 5


class _Clock:
    """The total deadline and the minimum rate of one download."""

    def __init__(self, url: str, where: str, deadline: float, min_rate: float, grace: float):
        self.url, self.where, self.min_rate, self.grace = url, where, min_rate, grace
        self.deadline = deadline
        self.start = time.monotonic()
        self.bytes = 0

    def tick(self, n: int) -> None:
        """``n`` more bytes arrived; stop a download past its deadline or below the rate."""
        self.bytes += n
        elapsed = time.monotonic() - self.start
        if elapsed > self.deadline:
            raise DatasetError(f"downloading {self.url} took longer than {self.deadline:g} s",
                               where=self.where, hint="use a faster source, or upload the file")
        if elapsed > self.grace and self.bytes < self.min_rate * elapsed:
            raise DatasetError(f"downloading {self.url} was slower than {self.min_rate:g} "
                               f"bytes/s ({self.bytes} bytes in {elapsed:.0f} s)",
                               where=self.where, hint="use a faster source, or upload the file")


def local_name(url: str) -> str:
    """A file name for the download (the URL's last path part, else ``download.jsonl``)."""
    name = posixpath.basename(urlsplit(url).path)
    return name if name and name not in (".", "..") else "download.jsonl"


def fetch(url: str, *, where: str, max_bytes: int = MAX_BYTES, timeout: float = TIMEOUT_S,
          policy: Optional[AddressPolicy] = None, s3_grants: Optional[S3Grants] = None,
          workspace: str = "", deadline: float = DEADLINE_S, min_rate: float = MIN_RATE_BPS,
          rate_grace: float = RATE_GRACE_S) -> bytes:
    """The body of ``url``; ``DatasetError`` for a bad scheme, an HTTP error, a network
    failure or a body over ``max_bytes``.

    With ``policy`` (the job server), every address, the first and each redirect's, must be
    one the policy allows: the host is resolved once, checked, and connected to by that
    address (TLS still checks the certificate against the host name); no proxy is used. With
    a policy, ``s3://`` is read only where ``s3_grants`` gives ``workspace`` the bucket.

    The whole download takes at most ``deadline`` seconds, and after ``rate_grace`` seconds it
    must average ``min_rate`` bytes per second, else it stops with a ``DatasetError``."""
    import httpx

    clock = _Clock(url, where, deadline, min_rate, rate_grace)
    if urlsplit(url).scheme == "s3":
        if policy is not None:  # the job server: its operator's credentials sign the request
            (s3_grants or S3Grants()).check(workspace, url, where=where)
        return fetch_s3(url, where=where, max_bytes=max_bytes, policy=policy, clock=clock)
    _check_scheme(url, url, where)
    try:
        with httpx.Client(timeout=min(timeout, deadline), follow_redirects=policy is None,
                          trust_env=policy is None) as client:
            current = url
            for _ in range(MAX_REDIRECTS + 1):
                clock.tick(0)  # a chain of slow redirects counts too
                resp = client.send(_request(client, current, policy, where), stream=True)
                try:
                    if policy is not None and resp.is_redirect and "location" in resp.headers:
                        current = str(httpx.URL(current).join(resp.headers["location"]))
                        _check_scheme(current, url, where)
                        continue
                    return _body(resp, url, where, max_bytes, clock)
                finally:
                    resp.close()
            raise DatasetError(f"downloading {url} failed: more than {MAX_REDIRECTS} "
                               "redirects", where=where, hint="use the final address")
    except httpx.HTTPError as exc:
        raise DatasetError(f"downloading {url} failed: {type(exc).__name__}: {exc}",
                           where=where, hint="check the URL and the network") from None


def fetch_s3(url: str, *, where: str, max_bytes: int = MAX_BYTES,
             policy: Optional[AddressPolicy] = None, clock: Optional[_Clock] = None) -> bytes:
    """The object at ``s3://bucket/key`` of the S3-compatible store the environment names;
    with ``policy``, its endpoint must be an address the policy allows."""
    import os

    try:
        import fsspec
        import s3fs  # noqa: F401  (fsspec's s3 implementation)
    except ImportError:
        raise DatasetError(f"{url}: reading s3:// (Ark's tos_bucket / tos_paths) needs s3fs",
                           where=where, hint="pip install 'rltune[s3]', or copy the data "
                           "locally and list it under local_files") from None
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if policy is not None and endpoint:
        parts = urlsplit(endpoint)
        port = parts.port or (80 if parts.scheme == "http" else 443)
        policy.resolve(parts.hostname or "", port, where=where)
    fs = fsspec.filesystem("s3", client_kwargs={"endpoint_url": endpoint} if endpoint else {},
                           skip_instance_cache=True)
    try:
        with fs.open(url, "rb") as fh:
            chunks, size = [], 0
            while size <= max_bytes and (chunk := fh.read(min(1 << 20, max_bytes + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
                if clock is not None:
                    clock.tick(len(chunk))
            body = b"".join(chunks)
    except DatasetError:
        raise
    except FileNotFoundError:
        raise DatasetError(f"{url} does not exist in the store"
                           + (f" at {endpoint}" if endpoint else ""), where=where,
                           hint="check the bucket and path (tos_bucket / tos_paths)") from None
    except Exception as exc:  # credentials, network, permissions: say which
        raise DatasetError(f"reading {url} failed: {type(exc).__name__}: {exc}", where=where,
                           hint="check AWS_ENDPOINT_URL and the access keys") from None
    if len(body) > max_bytes:
        raise DatasetError(f"{url} is larger than {max_bytes} bytes", where=where,
                           hint="split the dataset into smaller files")
    return body


def _check_scheme(url: str, original: str, where: str) -> None:
    if urlsplit(url).scheme not in ("http", "https"):
        what = "download_url" if url == original else f"download_url {original!r} redirects to"
        raise DatasetError(f"{what} {url!r} is not an http(s) URL", where=where,
                           hint="use an http://, https:// or s3:// address, or upload the file")


def _request(client: Any, url: str, policy: Optional[AddressPolicy], where: str) -> Any:
    """A GET of ``url``; with a policy, addressed to the checked IP with the original Host."""
    import httpx

    if policy is None:
        return client.build_request("GET", url)
    target = httpx.URL(url)
    port = target.port or (443 if target.scheme == "https" else 80)
    ip = policy.resolve(target.host, port, where=where)
    host = target.host if target.port is None else f"{target.host}:{target.port}"
    if ":" in target.host:
        host = f"[{target.host}]" + (f":{target.port}" if target.port else "")
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    return client.build_request("GET", target.copy_with(host=ip), headers={"Host": host},
                                extensions=extensions)


def _body(resp: Any, url: str, where: str, max_bytes: int, clock: _Clock) -> bytes:
    if resp.status_code >= 400 or resp.is_redirect:
        raise DatasetError(f"downloading {url} failed: HTTP {resp.status_code} "
                           f"{resp.reason_phrase}", where=where,
                           hint="check the URL (signed URLs expire) and that the "
                                "server can reach it")
    body = bytearray()
    for chunk in resp.iter_bytes():
        body += chunk
        clock.tick(len(chunk))
        if len(body) > max_bytes:
            raise DatasetError(f"{url} is larger than {max_bytes} bytes", where=where,
                               hint="split the dataset into smaller files")
    return bytes(body)


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
