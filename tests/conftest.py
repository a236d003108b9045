"""Shared test fixtures.  Sessions and state go to a temporary XDG state dir, never $HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    yield


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


# ------------------------------------------------------------------ network: loopback only
# Tests contact only 127.0.0.0/8 (and ::1, Unix sockets); the story's 10.x/192.168.x addresses are
# data in them, never targets.  Every connect made in a test process goes through this check, so a
# test that would reach out fails loudly instead of trying.  (Subprocesses are bed nodes and the CLI
# pointed at bed configs, which hold 127.x addresses only.)
import ipaddress  # noqa: E402
import socket  # noqa: E402


class OutsideLoopback(AssertionError):
    pass


def _loopback_only(address) -> None:
    if not isinstance(address, tuple):  # AF_UNIX path (str/bytes): local by nature
        return
    host = address[0]
    if host == "localhost":
        return
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        raise OutsideLoopback(f"a test connected to the name {host!r}: use a 127.x address") from None
    mapped = getattr(ip, "ipv4_mapped", None)
    if not (ip.is_loopback or (mapped is not None and mapped.is_loopback)):
        raise OutsideLoopback(f"a test connected to {host}: tests contact only 127.0.0.0/8")


@pytest.fixture(autouse=True, scope="session")
def _network_is_loopback_only():
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _loopback_only(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _loopback_only(address)
        return real_connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    yield
    socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex
