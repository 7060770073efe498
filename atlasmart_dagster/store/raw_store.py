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

