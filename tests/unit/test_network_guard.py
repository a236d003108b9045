"""The suite's own guard (tests/conftest.py): a connect outside 127.0.0.0/8 fails before any packet."""
import socket

import pytest


@pytest.mark.parametrize("addr", [("192.168.200.12", 9), ("10.0.0.1", 9), ("8.8.8.8", 53)])
def test_a_connect_to_the_storys_addresses_is_refused_by_the_guard(addr):
    with socket.socket() as s, pytest.raises(AssertionError, match="127.0.0.0/8"):
        s.connect(addr)


def test_loopback_still_connects():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(srv.getsockname(), timeout=5):
            pass
