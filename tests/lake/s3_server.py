"""A real S3 server for the lake tests: moto's standalone server (``moto[server]``, pinned in
requirements-dev.txt) on 127.0.0.1, with IAM authentication switched on, and a TCP proxy in
front of it that a test can cut mid-stream.

moto checks request signatures once ``INITIAL_NO_AUTH_ACTION_COUNT`` unauthenticated
requests have been served (moto/core/config.py and moto's "IAM-like access control" docs):
the first requests create an IAM user with an s3:* policy, its access key and the bucket;
from then on a wrong key or secret is refused with 403, as AWS, MinIO or Ceph would.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

# create_user, put_user_policy, create_access_key, create_bucket
_SETUP_REQUESTS = 4
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class MotoServer:
    """One moto S3 server process; ``stop``/``start`` are a real server going away and back
    (moto keeps its buckets in memory: a restarted server is empty until ``setup``)."""

    port: int
    log: Path
    bucket: str = "stepscope-lake"
    key_id: str = ""
    secret: str = ""
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_REQUESTS)}
        exe = Path(sys.executable).with_name("moto_server")
        self.proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            env=env, stdout=self.log.open("a"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                # moto's own dashboard route answers without counting as an AWS action
                urllib.request.urlopen(f"{self.url}/moto-api/data.json", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start in 60 s"
                time.sleep(0.2)
        self.setup()

    def setup(self) -> None:
        """A user allowed s3:*, its access key, and the bucket (the unauthenticated calls)."""
        import boto3

        kw = dict(endpoint_url=self.url, region_name=REGION, aws_access_key_id="setup",
                  aws_secret_access_key="setup")  # fmt: skip
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="stepscope")
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}  # fmt: skip
        iam.put_user_policy(UserName="stepscope", PolicyName="lake",
                            PolicyDocument=json.dumps(policy))  # fmt: skip
        key = iam.create_access_key(UserName="stepscope")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self.client().create_bucket(Bucket=self.bucket)

    def client(self, **overrides: str):  # noqa: ANN201 - a boto3 S3 client
        import boto3

        kw = dict(endpoint_url=self.url, region_name=REGION, aws_access_key_id=self.key_id,
                  aws_secret_access_key=self.secret)  # fmt: skip
        return boto3.client("s3", **{**kw, **overrides})

    def keys(self, prefix: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2")
        return [o["Key"] for p in pages.paginate(Bucket=self.bucket, Prefix=prefix)
                for o in p.get("Contents", [])]  # fmt: skip

    def stop(self, kill: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            self.proc.wait(30)
        self.proc = None


@dataclass
class TcpProxy:
    """127.0.0.1:port -> target, over real sockets. ``cut()`` closes every connection and
    stops listening (connection refused, as a dead server); ``resume()`` listens again.
    ``on_upload(n, fn)`` calls ``fn`` once more than ``n`` bytes went client -> server."""

    target_port: int
    port: int = field(default_factory=free_port)
    sent: int = 0
    _threshold: tuple[int, object] | None = None
    _listener: socket.socket | None = None
    _conns: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resume(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, []
        if listener is not None:
            # close() alone leaves a thread blocked in accept() holding the socket open
            # (Linux): shutdown wakes it, and the port refuses connections from now on.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def on_upload(self, after_bytes: int, fn) -> None:  # noqa: ANN001
        with self._lock:
            self.sent = 0
            self._threshold = (after_bytes, fn)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, upload: bool) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if upload:
                    self._count(len(data))
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _count(self, n: int) -> None:
        with self._lock:
            self.sent += n
            fire = self._threshold if self._threshold and self.sent > self._threshold[0] else None
            if fire:
                self._threshold = None
        if fire:
            fire[1]()
