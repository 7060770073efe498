"""The immutable raw store: every landed batch, byte for byte, write-once.

Layout: ``raw/sales_date=YYYY-MM-DD/batch_id=B/`` holding the data file (under
its landed name) and ``_manifest.json``. A batch enters in two steps:

1. ``stage()`` copies the landing file into a private temporary folder inside
   the store while hashing it, so what is validated and later parsed is the
   copy, not a landing file the ERP might still be rewriting;
2. ``commit()`` moves the validated folder into place with an atomic rename
   and makes its files read-only.

A batch id is written once. Re-landing the same id with the same bytes is a
no-op (re-runs are idempotent); with different bytes it is a
``RawEvidenceConflict``: the evidence already stored is never overwritten. A
re-delivery for the same day must carry a new batch id and both are kept.

Replays and repairs read a day's batches from here, never from the landing
zone again (``product/readiness.py``); ``verify()`` makes sure the bytes they
read are still the bytes admitted.

On an object store (``ObjectRawStore``) the same layout is a key prefix.
There is no rename to make a folder appear at once, so the manifest is the
commit: the data file is put first and the manifest last, each with a
conditional put that the server refuses when the key exists, and a batch is
in the store once its manifest is. A writer killed between the two puts
leaves a data file without a manifest, which the next commit of the same
batch finds and compares byte for byte (the same bytes: the commit
completes; other bytes: ``RawEvidenceConflict``). Readers get the batch's
files through a local cache (``StoredBatch.folder``), so parsing stays a
local read; ``verify()`` hashes the object in the bucket, not the cache.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import RawEvidenceConflict
from .object_store import S3Store

MANIFEST_NAME = "_manifest.json"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_CHUNK = 1 << 20


def is_safe_batch_id(batch_id: str) -> bool:
    return bool(_SAFE_ID.match(batch_id or "")) and ".." not in batch_id


class NotARegularFile(ValueError):
    """A landed file that turned out not to be a regular file when it was opened."""


def open_regular_file(path: Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file reached without a symbolic link.

    ``O_NOFOLLOW`` and ``O_NONBLOCK`` make a link or a named pipe swapped in
    after a check fail here instead of being followed or blocking the reader.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile(f"{path.name} is a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(f"{path.name} is not a regular file")
    return fd


def read_regular_file(path: Path) -> bytes:
    with os.fdopen(open_regular_file(path), "rb") as handle:
        return handle.read()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoredBatch:
    """A batch committed to the raw store."""

    partition: str
    batch_id: str
    folder: Path
    data_file: str
    manifest: dict

    @property
    def data_path(self) -> Path:
        return self.folder / self.data_file

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_NAME


@dataclass
class StagedBatch:
    """A batch copied into the store's staging area, not yet committed."""

    partition: str
    batch_id: str
    folder: Path
    data_file: str
    data_sha256: str
    manifest_bytes: bytes

    @property
    def data_path(self) -> Path:
        return self.folder / self.data_file

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class RawStore:
    """Write-once store of landed batches under ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _final_folder(self, partition: str, batch_id: str) -> Path:
        return self.root / f"sales_date={partition}" / f"batch_id={batch_id}"

    def stage(self, partition: str, batch_id: str, data_path: Path, manifest_bytes: bytes) -> StagedBatch:
        """Copy the landing file into a temporary folder, hashing while copying.

        The file is opened without following a symbolic link and must be a
        regular file (``NotARegularFile`` otherwise, nothing staged): what a
        check saw is what is copied, even if the landing zone changes between.
        """
        if not is_safe_batch_id(batch_id):
            raise ValueError(f"unsafe batch id {batch_id!r}")
        staging = self.root / ".staging"
        staging.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(dir=staging, prefix=f"{batch_id}-"))
        target = folder / data_path.name
        digest = hashlib.sha256()
        try:
            source = os.fdopen(open_regular_file(data_path), "rb")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        with source as src, open(target, "wb") as dst:
            while chunk := src.read(_CHUNK):
                digest.update(chunk)
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        (folder / MANIFEST_NAME).write_bytes(manifest_bytes)
        return StagedBatch(partition, batch_id, folder, data_path.name, digest.hexdigest(), manifest_bytes)

    def commit(self, staged: StagedBatch) -> tuple[StoredBatch, bool]:
        """Move a validated batch into place. Returns (batch, newly_written)."""
        final = self._final_folder(staged.partition, staged.batch_id)
        existing = self.get(staged.partition, staged.batch_id)
        if existing is not None:
            staged.discard()
            stored_sha = sha256_file(existing.data_path)
            if stored_sha != staged.data_sha256 or existing.data_file != staged.data_file:
                raise RawEvidenceConflict(
                    f"batch {staged.batch_id} for sales_date={staged.partition} is already in the raw store "
                    f"with sha256 {stored_sha[:12]}…, and arrived again with different bytes "
                    f"({staged.data_sha256[:12]}…); the stored evidence is kept, the new delivery needs a new batch_id"
                )
            return existing, False
        final.parent.mkdir(parents=True, exist_ok=True)
        for item in staged.folder.iterdir():
            item.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        try:
            os.rename(staged.folder, final)
        except OSError:
            # Another run committed the same batch a moment ago: compare instead.
            if final.exists():
                return self.commit(staged)
            raise
        stored = self.get(staged.partition, staged.batch_id)
        assert stored is not None
        return stored, True

    def verify(self, stored: StoredBatch) -> None:
        """Raise ``RawEvidenceConflict`` unless the stored data file still hashes to its manifest's ``data_sha256``.

        Files are read-only, not untouchable: a replay must not build a day
        from evidence changed (or lost) after it was admitted.
        """
        where = f"raw store batch {stored.batch_id} of sales_date={stored.partition}"
        if not stored.data_path.is_file():
            raise RawEvidenceConflict(
                f"{where} lost its data file {stored.data_file}: the admitted evidence cannot be replayed; "
                "restore the raw store from a backup (atlasmart restore BACKUP)"
            )
        declared = str(stored.manifest.get("data_sha256", "")).lower()
        found = sha256_file(stored.data_path)
        if found != declared:
            raise RawEvidenceConflict(
                f"{where} no longer hashes to its manifest's data_sha256 ({found[:12]}…, admitted as "
                f"{declared[:12]}…): the evidence changed after admission; restore the raw store from a backup "
                "(atlasmart restore BACKUP)"
            )

    def stored_sha256(self, stored: StoredBatch) -> str | None:
        """The SHA-256 of the batch's data file as the store holds it now (None: the file is gone)."""
        return sha256_file(stored.data_path) if stored.data_path.is_file() else None

    def any_batches(self) -> bool:
        """Whether the store holds any batch (the platform's store check)."""
        return next(self.root.glob("sales_date=*/batch_id=*"), None) is not None

    def holds(self, partition: str, batch_id: str) -> bool:
        """Whether the batch's place exists (its files are ``verify``'s business)."""
        return self._final_folder(partition, batch_id).is_dir()

    def get(self, partition: str, batch_id: str) -> StoredBatch | None:
        folder = self._final_folder(partition, batch_id)
        manifest_path = folder / MANIFEST_NAME
        if not manifest_path.exists():
            return None
        # Bytes, as readiness parsed them: JSON's own detection takes a UTF-8 byte order mark.
        manifest = json.loads(manifest_path.read_bytes())
        return StoredBatch(partition, batch_id, folder, manifest["data_file"], manifest)

    def batches(self, partition: str) -> list[StoredBatch]:
        """All committed batches of a day, oldest delivery first (by source_seq_low)."""
        day = self.root / f"sales_date={partition}"
        found = []
        if day.is_dir():
            for folder in day.iterdir():
                if folder.name.startswith("batch_id="):
                    batch = self.get(partition, folder.name.removeprefix("batch_id="))
                    if batch is not None:
                        found.append(batch)
        return sorted(found, key=lambda b: (b.manifest.get("source_seq_low", 0), b.batch_id))



class ObjectRawStore(RawStore):
    """The raw store under an ``s3://`` prefix: write-once by conditional puts (see the module docstring).

    ``root`` is the local folder of staged batches and of the cache of read
    ones; ``prefix`` is where the evidence is kept.
    """

    def __init__(self, root: Path, store: S3Store, prefix: str):
        super().__init__(root)
        self.store = store
        self.prefix = prefix.rstrip("/")

    def _url(self, partition: str, batch_id: str, name: str) -> str:
        return f"{self.prefix}/sales_date={partition}/batch_id={batch_id}/{name}"

    def commit(self, staged: StagedBatch) -> tuple[StoredBatch, bool]:
        """Put the data file, then the manifest, each only if absent. Returns (batch, newly_written)."""
        data_url = self._url(staged.partition, staged.batch_id, staged.data_file)
        manifest_url = self._url(staged.partition, staged.batch_id, MANIFEST_NAME)
        try:
            existing = self.get(staged.partition, staged.batch_id)
            if existing is None:
                if not self.store.put_once(data_url, staged.data_path):
                    # A data file without a manifest: a commit killed half-way, or a racing one.
                    self._same_bytes(staged, data_url)
                wrote = self.store.put_once(manifest_url, staged.folder / MANIFEST_NAME)
                existing = self.get(staged.partition, staged.batch_id)
                assert existing is not None
                if wrote:
                    return existing, True
            if existing.data_file != staged.data_file:
                self._conflict(staged, "(another data file)")
            self._same_bytes(staged, self._url(existing.partition, existing.batch_id, existing.data_file))
            return existing, False
        finally:
            staged.discard()

    def _same_bytes(self, staged: StagedBatch, url: str) -> None:
        stored_sha = self._sha256(url)
        if stored_sha != staged.data_sha256:
            self._conflict(staged, f"with sha256 {stored_sha[:12]}…,")

    @staticmethod
    def _conflict(staged: StagedBatch, stored: str) -> None:
        raise RawEvidenceConflict(
            f"batch {staged.batch_id} for sales_date={staged.partition} is already in the raw store "
            f"{stored} and arrived again with different bytes ({staged.data_sha256[:12]}…); the stored evidence "
            f"is kept, the new delivery needs a new batch_id"
        )

    def _sha256(self, url: str) -> str:
        digest = hashlib.sha256()
        for chunk in self.store.iter_chunks(url, _CHUNK):
            digest.update(chunk)
        return digest.hexdigest()

    def verify(self, stored: StoredBatch) -> None:
        """``RawStore.verify`` on the object in the bucket (the cache is this machine's copy, not the evidence)."""
        where = f"raw store batch {stored.batch_id} of sales_date={stored.partition}"
        url = self._url(stored.partition, stored.batch_id, stored.data_file)
        if not self.store.exists(url):
            raise RawEvidenceConflict(
                f"{where} lost its data file {url}: the admitted evidence cannot be replayed; restore the bucket "
                "prefix from its object versions or copy (docs/object-storage.md)"
            )
        declared = str(stored.manifest.get("data_sha256", "")).lower()
        found = self._sha256(url)
        if found != declared:
            raise RawEvidenceConflict(
                f"{where} no longer hashes to its manifest's data_sha256 ({found[:12]}…, admitted as "
                f"{declared[:12]}…): the evidence changed after admission; restore the object from its versions "
                "(docs/object-storage.md)"
            )
        if not stored.data_path.is_file() or sha256_file(stored.data_path) != declared:
            self.store.download(url, stored.data_path)  # a cache copy that differs is refreshed, never trusted

    def get(self, partition: str, batch_id: str) -> StoredBatch | None:
        """The batch, its manifest and data file copied into the local cache when not there yet."""
        folder = self._final_folder(partition, batch_id)
        manifest_url = self._url(partition, batch_id, MANIFEST_NAME)
        cached = folder / MANIFEST_NAME
        if not cached.is_file():
            if not self.store.exists(manifest_url):
                return None
            self.store.download(manifest_url, cached)
        manifest = json.loads(cached.read_bytes())
        data = folder / manifest["data_file"]
        if not data.is_file():
            self.store.download(self._url(partition, batch_id, manifest["data_file"]), data)
        return StoredBatch(partition, batch_id, folder, manifest["data_file"], manifest)

    def batches(self, partition: str) -> list[StoredBatch]:
        found = []
        for url in self.store.list(f"{self.prefix}/sales_date={partition}", suffix="/" + MANIFEST_NAME):
            batch_folder = url.rsplit("/", 2)[-2]
            if batch_folder.startswith("batch_id="):
                batch = self.get(partition, batch_folder.removeprefix("batch_id="))
                if batch is not None:
                    found.append(batch)
        return sorted(found, key=lambda b: (b.manifest.get("source_seq_low", 0), b.batch_id))

    def stored_sha256(self, stored: StoredBatch) -> str | None:
        """The SHA-256 of the object in the bucket (the cache is not the evidence)."""
        url = self._url(stored.partition, stored.batch_id, stored.data_file)
        return self._sha256(url) if self.store.exists(url) else None

    def any_batches(self) -> bool:
        return self.store.any(self.prefix)

    def holds(self, partition: str, batch_id: str) -> bool:
        return self.store.exists(self._url(partition, batch_id, MANIFEST_NAME))
