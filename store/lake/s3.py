"""Object storage for a lake's data files: where the S3 endpoint is, which credentials sign
the requests, and what an S3 failure means to a collector.

Settings follow the AWS SDKs where they have one, so a host already set up for the AWS CLI
or boto3 needs nothing more (https://docs.aws.amazon.com/sdkref/latest/guide/
feature-ss-endpoints.html): the endpoint is ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``,
else the profile's ``services`` s3 ``endpoint_url``, else its ``endpoint_url``
(``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`` skips all four); ``STEPSCOPE_S3_ENDPOINT``
overrides them. Region: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's ``region``.
Credentials: a DuckDB secret the user made whose scope covers the data path, else
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (+ ``AWS_SESSION_TOKEN``), else the AWS
SDK's credential chain through DuckDB's ``aws`` extension (``~/.aws/credentials`` and
``config``, ``AWS_PROFILE``; ``STEPSCOPE_S3_CREDENTIAL_CHAIN`` adds sso, sts, instance...).
"""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import duckdb

from store import settings
from store.errors import StoreBusy, StoreError
from store.location import redact
from store.sql import string_literal

SECRET_NAME = "stepscope_s3"
_S3_SCHEMES = ("s3://", "s3a://", "s3n://", "r2://", "gcs://", "gs://")


@dataclass(frozen=True)
class S3Endpoint:
    """Where S3 requests go; ``host`` None means AWS's own endpoint for the region."""

    host: str | None  # host[:port], no scheme
    use_ssl: bool
    url_style: str  # path | vhost
    region: str | None
    source: str  # the setting that named the endpoint, for messages

    def describe(self) -> str:
        if self.host is None:
            return f"AWS S3 ({self.region or 'us-east-1'})"
        return f"{'https' if self.use_ssl else 'http'}://{self.host} (from {self.source})"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _profile() -> dict[str, str]:
    """The active profile's section of the shared config file (``AWS_PROFILE``, default)."""
    path = Path(os.environ.get("AWS_CONFIG_FILE") or Path.home() / ".aws" / "config")
    name = os.environ.get("AWS_PROFILE") or "default"
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except (configparser.Error, OSError, UnicodeDecodeError):
        return {}
    section = name if name == "default" else f"profile {name}"
    values = dict(parser[section]) if parser.has_section(section) else {}
    services = values.get("services")
    if services and parser.has_section(f"services {services}"):
        # ``s3 =`` followed by indented ``endpoint_url = ...`` lines (a nested block)
        nested = parser[f"services {services}"].get("s3", "")
        match = re.search(r"endpoint_url\s*=\s*(\S+)", nested)
        if match:
            values["s3_endpoint_url"] = match[1]
    return values


def _endpoint_url() -> tuple[str | None, str]:
    if os.environ.get(settings.S3_ENDPOINT.name):
        return os.environ[settings.S3_ENDPOINT.name], settings.S3_ENDPOINT.name
    if _truthy(os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")):
        return None, "AWS"
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return os.environ[name], name
    profile = _profile()
    for key in ("s3_endpoint_url", "endpoint_url"):
        if profile.get(key):
            return profile[key], f"{key.replace('s3_', 'services s3 ')} in the AWS profile"
    return None, "AWS"


def endpoint() -> S3Endpoint:
    """The endpoint, TLS, URL style and region every S3 request of this process uses."""
    url, source = _endpoint_url()
    host, scheme_ssl = None, True
    if url:
        parts = urlsplit(url if "://" in url else f"//{url}")
        if not parts.hostname or parts.path not in ("", "/") or parts.username:
            raise StoreError(f"S3 endpoint {redact(url)!r} ({source}): give host[:port] or "
                             "http(s)://host[:port], without a path or credentials")  # fmt: skip
        host = parts.netloc
        scheme_ssl = parts.scheme != "http"
    ssl_setting = os.environ.get(settings.S3_USE_SSL.name)
    use_ssl = _truthy(ssl_setting) if ssl_setting else scheme_ssl
    # Self-hosted servers (MinIO, Ceph RGW, moto) address buckets by path; AWS by host name.
    style = os.environ.get(settings.S3_URL_STYLE.name) or ("path" if host else "vhost")
    if style not in ("path", "vhost"):
        raise StoreError(f"{settings.S3_URL_STYLE.name}={style!r}: give path or vhost")
    region = (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
              or _profile().get("region"))  # fmt: skip
    return S3Endpoint(host, use_ssl, style, region, source)


def is_object_store(data_path: str | None) -> bool:
    return bool(data_path) and data_path.lower().startswith(_S3_SCHEMES)


def create_secret(
    con: duckdb.DuckDBPyConnection,
    data_path: str,
    load: Callable[[duckdb.DuckDBPyConnection, str], None],
) -> None:
    """Make the DuckDB secret that signs requests for ``data_path`` (``load``: lake._load).

    A secret the user created (``CREATE PERSISTENT SECRET ... SCOPE 's3://bucket'``) that
    covers the path is used as it is.
    """
    ep = endpoint()
    found = con.execute("SELECT name FROM which_secret(?, 's3')", [data_path]).fetchone()
    if found is not None:
        return
    fields = {"URL_STYLE": ep.url_style, "USE_SSL": "true" if ep.use_ssl else "false"}
    if ep.host:
        fields["ENDPOINT"] = ep.host
    if ep.region:
        fields["REGION"] = ep.region
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        provider = {"PROVIDER": "config", "KEY_ID": key, "SECRET": secret}
        if os.environ.get("AWS_SESSION_TOKEN"):
            provider["SESSION_TOKEN"] = os.environ["AWS_SESSION_TOKEN"]
    else:
        load(con, "aws")  # the AWS SDK's credential chain: profiles, SSO, roles...
        chain = os.environ.get(settings.S3_CREDENTIAL_CHAIN.name) or "env;config"
        provider = {"PROVIDER": "credential_chain", "CHAIN": chain}
        if os.environ.get("AWS_PROFILE"):
            provider["PROFILE"] = os.environ["AWS_PROFILE"]
    body = ", ".join(
        f"{k} {v if k == 'PROVIDER' else string_literal(v)}"
        for k, v in {**provider, **fields}.items()
    )
    try:  # CREATE SECRET takes no bound parameters; the values are the operator's settings
        con.execute(f"CREATE OR REPLACE SECRET {SECRET_NAME} (TYPE s3, {body})")
    except duckdb.Error as exc:
        raise StoreError(
            f"no S3 credentials for {redact(data_path)}: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, a profile in ~/.aws (AWS_PROFILE), or create a DuckDB "
            f"secret ({str(exc).splitlines()[0]})"
        ) from None


# httpfs's words (duckdb-httpfs, httpfs.cpp/s3fs.cpp): a request that got no HTTP answer is
# "<what the HTTP client said> error for HTTP <METHOD> to '<url>'" ("Could not connect to
# server", "Server returned nothing (no headers, no data)", ...); an S3 error document
# follows "(HTTP code N)" or "(HTTP N Reason)".
_NO_ANSWER = re.compile(r"(?:IO Error: )?([^\n]*?) error for HTTP ([A-Z]+) to '")
_CONNECTION = re.compile(r"Timeout was reached|timed out|Connection reset|Broken pipe", re.I)
_HTTP_CODE = re.compile(r"\(HTTP (?:code )?(\d{3})\b")
_S3_CODE = re.compile(r"\n\s*(\w+): ([^\n]*)")


def outage(data_path: str, ep: S3Endpoint | None, exc: BaseException) -> StoreError | None:
    """What an httpfs error on the lake's data path means, in one line; None if it is not an
    S3 failure. Every object-store failure is a StoreBusy (exit 75, the run kept in the
    spool): the next ``flush`` commits it once the endpoint answers and accepts the key."""
    text = str(exc)
    if not isinstance(exc, duckdb.IOException | duckdb.HTTPException):
        return None
    where = f"lake data path {redact(data_path)} at {ep.describe() if ep else 'S3'}"
    code = _HTTP_CODE.search(text)
    if code:
        status = int(code[1])
        detail = _S3_CODE.search(text[code.end() :])
        said = f"{detail[1]}: {detail[2].strip()}" if detail else f"HTTP {status}"
        if status == 404 and detail is not None and detail[1] == "NoSuchBucket":
            bucket = urlsplit(data_path).netloc
            return StoreBusy(f"{where}: bucket {bucket!r} does not exist ({said}); create it "
                             "or fix the data path")  # fmt: skip
        if status in (400, 401, 403):
            return StoreBusy(f"{where} refused the request ({said}); check the access key "
                             "and secret, the profile or the bucket policy")  # fmt: skip
        if status >= 500 or status == 429:
            return StoreBusy(f"{where} is unavailable ({said})")
        return None  # e.g. 404 NoSuchKey: a file the catalog names is gone (not an outage)
    match = _NO_ANSWER.search(text)
    if match:
        return StoreBusy(f"{where} is unreachable: {match[1][:1].lower()}{match[1][1:]} "
                         f"(HTTP {match[2]})")  # fmt: skip
    match = _CONNECTION.search(text)
    if match:
        return StoreBusy(f"{where} is unreachable: {match[0].lower()}")
    return None
