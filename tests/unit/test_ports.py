"""Ports for servers started on a named port lie below the kernel's ephemeral range, where no
outgoing connection can take one between the draw and the server's bind."""
import itertools
import socket

from tests.support import ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range_with_their_twins():
    floor = ports._ephemeral_floor()
    drawn = ports.free_ports(50, twin=10000)
    assert len(set(drawn)) == 50
    for port in drawn:
        assert port + 10000 < floor
        with socket.socket() as s, socket.socket() as twin:
            s.bind(("127.0.0.1", port))
            twin.bind(("127.0.0.1", port + 10000))


def test_a_port_taken_is_drawn_again(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", ports.free_ports(1)[0]))
        taken = held.getsockname()[1]
        offsets = itertools.chain([taken - ports._FLOOR] * 3, itertools.count(taken - ports._FLOOR + 1))
        monkeypatch.setattr(ports.os, "urandom", lambda size: next(offsets).to_bytes(size, "big"))
        drawn = ports.free_ports(1)
    assert drawn != [taken]
