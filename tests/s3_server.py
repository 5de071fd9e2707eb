"""moto's S3 server on 127.0.0.1, as the tests and `benchmarks/s3_scan.py` run it: a real S3 REST API in
a child process, configured the way an operator configures kafkalog for one (the standard AWS
environment variables), and its request log kept so that a test can count what a read asked for."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

# werkzeug's access log line: ... "GET /bucket/key?query HTTP/1.1" 206 -  (colour codes stripped first)
_REQUEST = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/[\d.]+" (\d{3})')
_COLOUR = re.compile(r"\x1b\[[\d;]*m")


class Request(NamedTuple):
    method: str
    path: str  # /bucket/key, without the query
    query: str
    status: int


def environment(port: int) -> dict[str, str]:
    """The standard AWS variables that point pyarrow and deltalake at the server (deltalake also needs
    AWS_ALLOW_HTTP for a plain-http endpoint, and AWS_S3_ALLOW_UNSAFE_RENAME to write without a lock)."""
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "kafkalog-tests",
        "AWS_SECRET_ACCESS_KEY": "kafkalog-tests-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }


class S3Server:
    """Started on entry, stopped on exit whatever happens; the AWS variables of `environment(port)`
    must already be set in this process (they are read by the clients, not by the server)."""

    def __init__(self, port: int, log: Path):
        self.port = port
        self.log = log
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> S3Server:
        with open(self.log, "wb") as out:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_until_listening()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=30)

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self._process is not None
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.2)

    def create_bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3").create_bucket(Bucket=name)

    def requests(self) -> list[Request]:
        """Every request the server has logged so far, in order."""
        text = _COLOUR.sub("", self.log.read_text(encoding="utf-8", errors="replace"))
        out = []
        for method, target, status in _REQUEST.findall(text):
            path, _, query = target.partition("?")
            out.append(Request(method, path, query, int(status)))
        return out
