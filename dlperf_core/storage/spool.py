"""A durable local spool for results the database could not take.

When writing a result still fails after :class:`~dlperf_core.storage.store.ResultStore`'s retries
with exponential backoff (database down, network gone), the result is written here as one JSON file,
atomically (temporary file, ``fsync``, ``rename``, ``fsync`` of the folder), so a crash at any point
leaves either the whole record or nothing. :meth:`ResultSpool.drain` writes the spooled records to
the store and deletes each file only after its write committed; results are upserted on
``(dag_id, run_id, case_key, repeat)``, so draining twice (or a crash between commit and delete)
adds no duplicate.

The spool folder is ``$DLPERF_SPOOL_DIR`` (default ``$DLPERF_HOME/.dlperf/spool``), with one sub-folder per
results database (a hash of its URL without password), so records never drain into another
database. A file that cannot be read back is renamed ``*.bad`` and kept, never deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path

from sqlalchemy import make_url
from sqlalchemy.exc import InterfaceError, OperationalError

from dlperf_core.home import env_path
from dlperf_core.storage.records import ResultRecord
from dlperf_core.storage.store import ResultStore

log = logging.getLogger("dlperf.spool")

DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
"""Errors that mean "the database cannot be reached now" (spool and retry later), unlike a refused
record (IntegrityError), which is a bug to surface rather than to keep retrying."""


def default_spool_dir() -> Path:
    """``$DLPERF_SPOOL_DIR``, else ``$DLPERF_HOME/.dlperf/spool`` (:mod:`dlperf_core.home`; absolute)."""
    return env_path("DLPERF_SPOOL_DIR", "spool")


def database_key(db_url: str) -> str:
    """A short, stable name for the database at ``db_url`` (the password is not part of it)."""
    public = make_url(db_url).render_as_string(hide_password=True)
    return hashlib.sha256(public.encode()).hexdigest()[:16]


def record_to_json(record: ResultRecord) -> str:
    """``record`` (with its benchmark run, if any) as JSON text: its generated JSON form
    (:meth:`ResultRecord.to_json`), keys sorted. The text is what the hand-written form wrote before, so files
    spooled by an older dlperf read back (``tests/data/spool``)."""
    return json.dumps(record.to_json(), sort_keys=True)


def record_from_json(text: str) -> ResultRecord:
    """The inverse of :func:`record_to_json`; raises ValueError (pydantic's ValidationError is one), TypeError or
    KeyError on bad input, and ValueError for a field the record does not have."""
    values = json.loads(text)
    if not isinstance(values, dict):
        raise TypeError("a spooled record must be a JSON object")
    unknown = set(values) - {f.name for f in fields(ResultRecord)}
    if unknown:
        raise ValueError(f"unknown fields in spooled record: {sorted(unknown)}")
    return ResultRecord.from_json(values)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class DrainReport:
    """What one :meth:`ResultSpool.drain` did."""

    written: int  # records written to the database and removed from the spool
    left: int  # records still spooled (the database failed again)
    bad: int  # files that could not be read back (kept as *.bad)


class ResultSpool:
    """The spool of one results database: ``<root>/<database_key(db_url)>/*.json``."""

    def __init__(self, db_url: str, root: Path | None = None) -> None:
        self.folder: Path = (root or default_spool_dir()) / database_key(db_url)

    def __repr__(self) -> str:
        return f"ResultSpool({str(self.folder)!r})"

    def put(self, record: ResultRecord) -> Path:
        """Write ``record`` durably (tmp + fsync + rename + fsync folder); return its file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{datetime.now().strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}"
        tmp = self.folder / f".{name}.tmp"
        final = self.folder / f"{name}.json"
        data = record_to_json(record).encode()
        try:
            with tmp.open("wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.folder)
        return final

    def pending(self) -> list[Path]:
        """Spooled record files, oldest first."""
        if not self.folder.is_dir():
            return []
        return sorted(self.folder.glob("*.json"))

    def drain(self, store: ResultStore) -> DrainReport:
        """Write every spooled record to ``store``, deleting each file after its commit.

        Stops at the first database-unavailable error (the rest stay spooled; the error is logged,
        not raised). Unreadable files are renamed ``*.bad`` and counted, never deleted.
        """
        written = bad = 0
        files = self.pending()
        for i, path in enumerate(files):
            try:
                record = record_from_json(path.read_text())
            except (ValueError, TypeError, KeyError) as exc:
                path.rename(path.with_suffix(".bad"))
                log.error(  # noqa: TRY400 - a bad file is expected here, its error is in the line: no traceback
                    "spooled record %s cannot be read (%s); kept as %s", path, exc, path.with_suffix(".bad")
                )
                bad += 1
                continue
            try:
                store.upsert_result(record)
            except DATABASE_UNAVAILABLE as exc:
                left = len(files) - i
                log.warning(
                    "results database still unavailable; %d results stay spooled in %s: %s",
                    left,
                    self.folder,
                    str(exc).splitlines()[0],
                )
                return DrainReport(written=written, left=left, bad=bad)
            path.unlink()
            written += 1
        if written:
            _fsync_dir(self.folder)
            log.info("drained %d spooled results from %s", written, self.folder)
        return DrainReport(written=written, left=0, bad=bad)


class SpoolFailed(RuntimeError):
    """Neither the database nor the spool could take a result (the database is down and the spool's disk is full
    or unwritable): the caller fails, and its input, kept by whoever ran it, is stored on a re-run."""


def store_or_spool(store: ResultStore, record: ResultRecord, spool: ResultSpool) -> Path | None:
    """Upsert ``record``; if the database stays unavailable after the store's retries, spool it.

    Returns None when it was written, or the spool file that now holds it; raises :class:`SpoolFailed` when
    the spool cannot take it either.
    """
    try:
        store.upsert_result(record)
    except DATABASE_UNAVAILABLE as exc:
        try:
            path = spool.put(record)
        except OSError as full:
            raise SpoolFailed(
                f"results database unavailable ({str(exc).splitlines()[0]}) and result {record.case_key} "
                f"r{record.repeat} could not be spooled to {spool.folder} either: {full}. Nothing was stored; "
                "run this task again once the database answers or the spool's disk has room"
            ) from full
        log.warning(
            "results database unavailable after retries (%s); result %s r%d spooled to %s",
            str(exc).splitlines()[0],
            record.case_key,
            record.repeat,
            path,
        )
        return path
    return None
