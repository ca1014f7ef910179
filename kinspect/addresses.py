"""Endpoint text, shared by every layer: capture names flows with it, the Kafka session labels
connections with it. It lives below both, so that wire/ never imports capture/."""

from __future__ import annotations

import socket


def format_addr(ip: bytes, port: int) -> str:
    """'10.0.0.5:51234', or '[::1]:9092' for IPv6."""
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, bytes(ip))}]:{port}"
