"""Ports for the servers the tests start on 127.0.0.1 (Kafka, S3, Spark's cluster and Connect)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS's choice for a bind to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
