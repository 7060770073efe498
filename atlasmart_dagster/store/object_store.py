"""Where table files and raw batches are kept: a folder, or a bucket on an S3 API.

The embedded home and the shared-folder team deployment keep them in a
folder (``LocalFolder``: paths, today's behaviour). A team deployment that
sets ``ATLASMART_WAREHOUSE=s3://bucket/prefix`` keeps them on an object
store (``S3Store``): Iceberg metadata and data files under
``<prefix>/warehouse/``, raw batches under ``<prefix>/raw/``, while the SQL
catalog and the ledger stay in Postgres. Only the places that differ
between the two go through this module: locations, listing, reading,
writing, write-once puts, and letting DuckDB read ``s3://`` files.

Credentials are never settings of AtlasMart: pyarrow and boto3 read the
standard AWS variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, or an instance profile) themselves, so no key is ever
held in an AtlasMart object, written to a file or put in a message.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from ..errors import EnvironmentFault, TransientError
from ..settings import Settings, current

ENDPOINT_ENV = Settings.s3_endpoint.name
DEFAULT_REGION = "us-east-1"
# pyarrow's AWS SDK (and boto3 >= 1.36) compute CRC checksums by default and
# send uploads as aws-chunked bodies without a Content-Length. S3 accepts that;
# other S3 APIs do not (Ceph RGW 16 answers HTTP 411 MissingContentLength on
# every multipart upload part, MinIO before 2025 likewise). "when_required"
# restores the plain signed uploads every S3 API accepts, and is what AWS's
# own SDKs did before 2025. Set for the process, before the first client, by
# ``S3Store`` (the SDKs read them when a client is built).
CHECKSUM_SETTINGS = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                     "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}


def is_object_store_url(location: str | None) -> bool:
    return bool(location) and str(location).startswith("s3://")


@dataclass(frozen=True)
class S3Location:
    """A bucket and key prefix on an S3 API, and how to reach it (no credentials: see the module docstring)."""

    bucket: str
    prefix: str  # without leading or trailing slash; "" for the bucket's root
    endpoint: str | None = None  # e.g. http://127.0.0.1:7481; None: AWS itself
    region: str = DEFAULT_REGION

    @classmethod
    def parse(cls, url: str, endpoint: str | None = None, region: str | None = None) -> "S3Location":
        parts = urlsplit(url)
        if parts.scheme != "s3" or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", parts.netloc or ""):
            raise ValueError(f"{url!r} is not an s3://bucket/prefix URL")
        return cls(parts.netloc, parts.path.strip("/"), endpoint or None,
                   region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION)

    @classmethod
    def from_environment(cls, url: str) -> "S3Location":
        return cls.parse(url, current().s3_endpoint, None)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def child(self, name: str) -> str:
        """The ``s3://`` URL of ``name`` under the prefix."""
        return f"{self.url}/{name}"

    @property
    def where(self) -> str:
        """The location as messages say it (the endpoint too, when it is not AWS)."""
        return self.url + (f" on {self.endpoint}" if self.endpoint else "")

    def iceberg_properties(self) -> dict[str, str]:
        """pyiceberg's FileIO settings: the region too, else it asks AWS for the bucket's region (6 s, then fails over)."""
        props = {"s3.region": self.region}
        if self.endpoint:
            props["s3.endpoint"] = self.endpoint
        return props


def object_store_fault(exc: BaseException, where: str) -> Exception | None:
    """The classified failure behind an S3 error from pyarrow, boto3, pyiceberg or DuckDB, or None.

    Throttling and server errors (HTTP 429/500/503, SlowDown, timeouts) are
    ``TransientError`` (the step is retried); a refusal (HTTP 403: a wrong
    key, an expired token, a bucket policy) and a missing bucket are
    ``EnvironmentFault``: no retry cures them, and the one line says what to fix.
    """
    text = str(exc)
    code = _http_status(exc)
    # pyarrow names the S3 error codes in capitals (SIGNATURE_DOES_NOT_MATCH), boto3 as S3 does.
    refused = code == 403 or any(m in text for m in (
        "ACCESS_DENIED", "AccessDenied", "INVALID_ACCESS_KEY_ID", "InvalidAccessKeyId", "SIGNATURE_DOES_NOT_MATCH",
        "SignatureDoesNotMatch", "EXPIRED_TOKEN", "ExpiredToken", "HTTP response code: 403", "HTTP status 403"))
    if refused:
        return EnvironmentFault(
            f"the object store {where} refused access (HTTP 403): check the AWS credentials of this process "
            f"(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or its role) and the bucket policy; retrying will not help")
    if "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        return EnvironmentFault(f"the bucket of {where} does not exist: create it, or correct ATLASMART_WAREHOUSE")
    if (code in (429, 500, 502, 503, 504) or any(m in text for m in (
            "SLOW_DOWN", "SlowDown", "Throttl", "SERVICE_UNAVAILABLE", "ServiceUnavailable", "InternalError",
            "HTTP response code: 5", "HTTP status 5", "curlCode: 7", "curlCode: 28", "NETWORK_CONNECTION"))):
        return TransientError(f"the object store {where} is unavailable or throttling ({_first_line(text)}): "
                              f"retried")
    return None


def _http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status else None
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "no detail"


class S3Store:
    """Objects under one ``S3Location``, reached with pyarrow (files) and boto3 (conditional puts)."""

    def __init__(self, location: S3Location):
        for name, value in CHECKSUM_SETTINGS.items():
            os.environ.setdefault(name, value)
        self.location = location
        self._lock = threading.Lock()

    # -- clients ----------------------------------------------------------
    @cached_property
    def filesystem(self):
        from pyarrow.fs import S3FileSystem

        kwargs = {"region": self.location.region}
        if self.location.endpoint:
            parts = urlsplit(self.location.endpoint)
            kwargs.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https")
        return S3FileSystem(**kwargs)

    @cached_property
    def client(self):
        import boto3  # the `s3` extra
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.location.endpoint, region_name=self.location.region,
                            config=Config(retries={"max_attempts": 5, "mode": "standard"}))

    @cached_property
    def fsspec(self):
        """The filesystem as fsspec sees it, for DuckDB (whose own S3 extension is not in the wheel)."""
        from fsspec.implementations.arrow import ArrowFSWrapper

        class S3ViaArrow(ArrowFSWrapper):
            protocol = "s3"

        return S3ViaArrow(self.filesystem)

    # -- keys -------------------------------------------------------------
    def key(self, url: str) -> str:
        """``bucket/key`` (pyarrow's path) of an ``s3://`` URL."""
        return url.removeprefix("s3://")

    def _split(self, url: str) -> tuple[str, str]:
        bucket, _, key = self.key(url).partition("/")
        return bucket, key

    # -- operations -------------------------------------------------------
    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - classified, else re-raised as it came
            fault = object_store_fault(exc, self.location.where)
            if fault is None:
                raise
            raise fault from exc

    def exists(self, url: str) -> bool:
        from pyarrow.fs import FileType

        info = self._call("stat", self.filesystem.get_file_info, self.key(url))
        return info.type == FileType.File

    def list(self, url: str, suffix: str = "") -> list[str]:
        """Every object under ``url`` (recursively) whose name ends in ``suffix``, as ``s3://`` URLs."""
        return [name for name, _ in self.entries(url, suffix)]

    def entries(self, url: str, suffix: str = "") -> list[tuple[str, float]]:
        """``list``, with each object's last-modified time (seconds since the epoch)."""
        from pyarrow.fs import FileSelector, FileType

        infos = self._call("list", self.filesystem.get_file_info,
                           FileSelector(self.key(url), recursive=True, allow_not_found=True))
        return sorted((f"s3://{i.path}", i.mtime.timestamp()) for i in infos
                      if i.type == FileType.File and i.path.endswith(suffix))

    def any(self, url: str) -> bool:
        bucket, key = self._split(url)
        answer = self._call("list", self.client.list_objects_v2, Bucket=bucket, Prefix=key.rstrip("/") + "/",
                            MaxKeys=1)
        return answer.get("KeyCount", 0) > 0

    def read_bytes(self, url: str) -> bytes:
        with self._call("read", self.filesystem.open_input_stream, self.key(url)) as stream:
            return stream.read()

    def open_input(self, url: str):
        return self._call("read", self.filesystem.open_input_stream, self.key(url))

    def upload(self, local: Path, url: str) -> None:
        """Put a local file at ``url`` (table data files, keyed by their bytes: a second put writes the same bytes)."""
        from pyarrow.fs import LocalFileSystem, copy_files

        self._call("write", copy_files, str(local), self.key(url), source_filesystem=LocalFileSystem(),
                   destination_filesystem=self.filesystem)

    def put_once(self, url: str, local: Path) -> bool:
        """Put ``local`` at ``url`` unless an object is there already; True if this call wrote it.

        A conditional put (``If-None-Match: *``): the server refuses it with
        HTTP 412 when the key exists, atomically, so two writers racing for
        the same key cannot both win and nothing stored is ever overwritten.
        """
        bucket, key = self._split(url)
        try:
            with open(local, "rb") as body:
                self.client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            return True
        except Exception as exc:  # noqa: BLE001 - 412/409: the key exists; else classified
            if _http_status(exc) in (409, 412):
                return False
            fault = object_store_fault(exc, self.location.where)
            if fault is None:
                raise
            raise fault from exc

    def download(self, url: str, local: Path) -> None:
        """Copy an object to a local file (written beside it, then renamed: never half a file)."""
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(f".{local.name}.{os.getpid()}.{threading.get_ident()}.part")
        with self.open_input(url) as source, open(partial, "wb") as target:
            while chunk := source.read(1 << 20):
                target.write(chunk)
        os.replace(partial, local)

    def delete(self, url: str) -> None:
        self._call("delete", self.filesystem.delete_file, self.key(url))

    def iter_chunks(self, url: str, size: int = 1 << 20) -> Iterator[bytes]:
        with self.open_input(url) as stream:
            while chunk := stream.read(size):
                yield chunk

    def register(self, con) -> None:
        """Let a DuckDB connection read and write ``s3://`` paths through pyarrow."""
        con.register_filesystem(self.fsspec)


_STORES: dict[S3Location, S3Store] = {}
_STORES_LOCK = threading.Lock()


def s3_store(location: S3Location) -> S3Store:
    """The process's one store of ``location`` (its clients are costly to build and thread-safe)."""
    with _STORES_LOCK:
        store = _STORES.get(location)
        if store is None:
            store = _STORES[location] = S3Store(location)
        return store
