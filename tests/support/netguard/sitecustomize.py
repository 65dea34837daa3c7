"""Loaded by a contextgate server started with this folder on PYTHONPATH (``tests/support/
netguard.py``): every socket connect and name lookup that is not to a loopback port listed
in ``CG_NETGUARD_PORTS`` is written to ``CG_NETGUARD_LOG`` and refused, as a firewall would."""

from __future__ import annotations

import os
import sys
from typing import Any

_LOG = os.environ.get("CG_NETGUARD_LOG")
_PORTS = {int(port) for port in os.environ.get("CG_NETGUARD_PORTS", "").split(",") if port}
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}


def _loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    return host is None or str(host) in _LOOPBACK_NAMES or str(host).startswith("127.")


def _refuse(event: str, what: str) -> None:
    assert _LOG is not None
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(f"{event} {what}\n")
    raise ConnectionRefusedError(f"netguard: {event} to {what} refused")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        address = args[1]
        if not isinstance(address, tuple):  # a Unix socket
            return
        host, port = address[0], address[1]
        if not (_loopback(host) and port in _PORTS):
            _refuse(event, f"{host}:{port}")
    elif event == "socket.getaddrinfo":
        if not _loopback(args[0]):
            _refuse(event, repr(args[0]))


if _LOG:
    sys.addaudithook(_hook)
