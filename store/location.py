"""Where the store lives: one resolved location for every CLI, page and test.

Precedence: an explicit ``--store`` value, then ``STEPSCOPE_STORE``, then the default
``$XDG_DATA_HOME/stepscope/stepscope.duckdb`` (``~/.local/share/...`` when unset).
A value starting with ``ducklake:`` selects the DuckLake backend (see store/lake/catalog.py).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from store import settings
from store.errors import StoreError

ENV_STORE = settings.STORE.name
ENV_DATA_PATH = settings.LAKE_DATA_PATH.name
ENV_SPOOL = settings.SPOOL.name


def default_store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "stepscope" / "stepscope.duckdb"


@dataclass(frozen=True)
class StoreLocation:
    """A resolved store: an embedded DuckDB file or a DuckLake catalog plus data path."""

    url: str
    kind: str  # "duckdb" | "ducklake"
    path: Path | None = None  # embedded file
    data_path: str | None = None  # ducklake data files (local dir or s3://...)
    # The data version the reader keys its cache on, asked once (store.reader.pinned) for a
    # page run instead of once per query: a lake's version is a catalog round trip.
    pinned_version: str | None = None

    @property
    def spool_dir(self) -> Path:
        """Bundles wait here until committed: next to the file, or a local dir per lake."""
        override = os.environ.get(ENV_SPOOL)
        if override:
            return Path(override)
        if self.path is not None:
            return self.path.with_name(self.path.name + ".spool")
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:12]
        return default_store_path().parent / f"lake-{digest}.spool"

    def describe(self) -> str:
        # Never show connection secrets in messages or pages.
        return str(self.path) if self.kind == "duckdb" else redact(self.url)

    @property
    def file(self) -> Path:
        """The embedded store's file, for code that opens it as a file; StoreError when
        there is none (a lake) or when its name is ``None``.

        ``str(loc.path)`` of a lake is ``"None"``, which DuckDB opens as a new store file
        named None in the current folder: a test's writer did exactly that (a stray
        274 KB ``None`` at the repository root), so such a path is refused, never opened.
        """
        if self.path is None:
            raise StoreError(f"store {self.describe()} is a {self.kind} store and has no file; "
                             "this needs an embedded store (a .duckdb path)")  # fmt: skip
        if self.path.name == str(None):
            raise StoreError(f"store {self.path}: a store file named None is refused (it is "
                             "what str(None) gives for a missing path); give the store's "
                             "real file name")  # fmt: skip
        return self.path


# Secrets a URL may carry: libpq's password=, a URL's user:password@, and query parameters
# that sign or authenticate a request (httpfs reads s3_access_key_id=, s3_secret_access_key=,
# s3_session_token= from an S3 URL; a presigned URL has X-Amz-Signature=, X-Amz-Credential=).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s;?#]*@")
_SECRET_PARAM = re.compile(
    r"(?i)\b([\w.-]*(?:password|passwd|secret|token|key_id|access_key|signature|credential)"
    r"[\w.-]*)=[^\s;&#]*"
)


def redact(url: str) -> str:
    """Hide every credential in a store URL or data path (for messages, logs and pages)."""
    return _SECRET_PARAM.sub(r"\1=***", _URL_USERINFO.sub(r"\1***@", url))


def refuse_credentials(data_path: str | None) -> None:
    """Raise StoreError (with the path redacted) when the data path carries credentials.

    They would be written into the lake's catalog, where every reader sees the data path,
    and into every log line that names it; keys belong in the environment, ~/.aws or a
    DuckDB secret (docs/lake.md).
    """
    if data_path and redact(data_path) != data_path:
        raise StoreError(
            f"data path {redact(data_path)}: credentials in the URL are refused; use "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile in ~/.aws (AWS_PROFILE) or a "
            "DuckDB secret"
        )


def lake_catalog(url: str) -> str:
    """What DuckLake's ATTACH gets after ``ducklake:``: the URL without Stepscope's options."""
    return url.removeprefix("ducklake:").partition(";")[0].strip()


def lake_url_data_path(url: str) -> str | None:
    """``ducklake:postgres:dbname=x host=y;data_path=/shared/lake`` -> ``/shared/lake``."""
    for option in url.partition(";")[2].split(";"):
        key, sep, value = option.strip().partition("=")
        if sep and key == "data_path" and value.strip():
            return value.strip()
    return None


def resolve(
    store: str | os.PathLike[str] | None = None, data_path: str | None = None
) -> StoreLocation:
    """Resolve ``--store``/``STEPSCOPE_STORE``/default into a StoreLocation."""
    value = str(store) if store else os.environ.get(ENV_STORE) or str(default_store_path())
    if value.startswith("ducklake:"):
        return StoreLocation(
            url=value,
            kind="ducklake",
            data_path=data_path or lake_url_data_path(value) or os.environ.get(ENV_DATA_PATH),
        )
    path = Path(value).expanduser().absolute()
    return StoreLocation(url=str(path), kind="duckdb", path=path)


def check_usable(loc: StoreLocation) -> None:
    """Fail fast, before any measuring, on a store path that can never be written."""
    refuse_credentials(loc.data_path)
    if loc.kind == "duckdb":
        path = loc.file
        if path.is_dir():
            raise StoreError(f"store {path} is a directory; give a file path such as "
                             f"{path / 'stepscope.duckdb'}")  # fmt: skip
        check_duckdb_file(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"store {path}: cannot create its folder ({exc.strerror})") from None
    try:
        loc.spool_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"spool {loc.spool_dir}: cannot create it ({exc.strerror})") from None


# duckdb/src/storage/magic_bytes.cpp (CheckMagicBytes): a database file has "DUCK" at
# MainHeader::MAGIC_BYTE_OFFSET, right after the header's 8-byte checksum.
_DUCKDB_MAGIC = (8, b"DUCK")


def check_duckdb_file(path: Path) -> None:
    """Raise StoreError when ``path`` exists and is not a DuckDB database file.

    DuckDB 1.5 opens any other file it can read (a CSV, a Parquet or JSON file) as an
    in-memory database of views over it: a commit there would succeed, keep nothing, and
    the run would leave the spool. A file that cannot be read is left to DuckDB's error.
    """
    offset, magic = _DUCKDB_MAGIC
    try:
        with open(path, "rb") as f:
            head = f.read(offset + len(magic))
    except OSError:
        return  # absent (a new store), a folder, or unreadable: said elsewhere
    if head[offset:] != magic:
        raise StoreError(f"store {path} is not a DuckDB database file: give the path of a "
                         "Stepscope store, or a new file name to create one")  # fmt: skip
