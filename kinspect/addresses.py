"""Endpoint text, shared by every layer: capture names flows with it, the Kafka session labels
connections with it. It lives below both, so that wire/ never imports capture/."""

from __future__ import annotations


def format_addr(ip: bytes, port: int) -> str:
    """'10.0.0.5:51234', or '[::1]:9092' for IPv6."""
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    from socket import AF_INET6, inet_ntop  # here: importing socket is 2 ms of every run's start-up

    return f"[{inet_ntop(AF_INET6, bytes(ip))}]:{port}"
