"""Every ``STEPSCOPE_*`` environment variable a user may set, declared once.

The modules that read a setting take its name from here, docs/settings.md's table
lists each one, and ``tests/test_docs.py`` fails when a variable is read somewhere but not
declared here, or declared but not documented with the same default and help text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str
    default: str  # what applies when the variable is unset, in words
    help: str


STORE = Setting(
    "STEPSCOPE_STORE",
    "$XDG_DATA_HOME/stepscope/stepscope.duckdb (~/.local/share/...)",
    "the store: a DuckDB file or a ducklake: URL; --store overrides it",
)
SPOOL = Setting(
    "STEPSCOPE_SPOOL",
    "<store>.spool next to the store",
    "where runs wait for their commit",
)
LAKE_DATA_PATH = Setting(
    "STEPSCOPE_LAKE_DATA_PATH",
    "none",
    "DuckLake data files (shared folder or s3:// URL) when the URL has no ;data_path=",
)
DUCKDB_EXTENSION_DIR = Setting(
    "STEPSCOPE_DUCKDB_EXTENSION_DIR",
    "$XDG_CACHE_HOME/stepscope/duckdb-extensions",
    "where the pinned duckdb-extension-* wheels are installed for DuckDB",
)
S3_ENDPOINT = Setting(
    "STEPSCOPE_S3_ENDPOINT",
    "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the AWS profile's endpoint_url, else AWS",
    "S3-compatible endpoint for lake data: host[:port] or http(s)://host[:port] (docs/lake.md)",
)
S3_URL_STYLE = Setting(
    "STEPSCOPE_S3_URL_STYLE",
    "path with a custom endpoint, else vhost",
    "path (MinIO, Ceph, moto) or vhost (AWS)",
)
S3_USE_SSL = Setting(
    "STEPSCOPE_S3_USE_SSL", "from the endpoint's scheme, else true", "TLS to the S3 endpoint"
)
S3_CREDENTIAL_CHAIN = Setting(
    "STEPSCOPE_S3_CREDENTIAL_CHAIN",
    "env;config",
    "AWS SDK credential providers tried when AWS_ACCESS_KEY_ID is unset (add sso, sts, "
    "instance, process)",
)
LOCK_DIR = Setting(
    "STEPSCOPE_LOCK_DIR",
    "/tmp/stepscope-locks",
    "the host-wide measurement lock folder",
)
NVML_MODULE = Setting(
    "STEPSCOPE_NVML_MODULE",
    "pynvml (nvidia-ml-py)",
    "the module that answers NVML calls (tests use a stand-in)",
)
DEBUG = Setting("STEPSCOPE_DEBUG", "off", "1 prints the traceback of an internal error")

SETTINGS: tuple[Setting, ...] = (
    STORE,
    SPOOL,
    LAKE_DATA_PATH,
    DUCKDB_EXTENSION_DIR,
    S3_ENDPOINT,
    S3_URL_STYLE,
    S3_USE_SSL,
    S3_CREDENTIAL_CHAIN,
    LOCK_DIR,
    NVML_MODULE,
    DEBUG,
)
