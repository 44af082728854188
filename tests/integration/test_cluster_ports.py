"""The ports a LocalCluster gives its nodes: free, and out of the way of outgoing connections."""

from __future__ import annotations

import random
import socket

from kraftlog.deploy._ports import _ephemeral_port_range, free_port_pair


def test_pairs_are_free_below_the_ephemeral_range_and_never_handed_out_twice() -> None:
    ephemeral_low, _ = _ephemeral_port_range()
    taken: set[int] = set()
    ports = [free_port_pair(taken, random.Random(7)) for _ in range(20)]
    assert len(taken) == 40, "a pair was handed out twice"
    for port in ports:
        assert port + 1 < ephemeral_low, "an outgoing connection could take this port before the node binds it"
        for p in (port, port + 1):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))


def test_a_port_a_listener_holds_is_not_chosen() -> None:
    rng_seed = 11
    first = free_port_pair(set(), random.Random(rng_seed))
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as grpc's servers do
        listener.bind(("127.0.0.1", first))
        listener.listen()
        again = free_port_pair(set(), random.Random(rng_seed))  # the same draws: the first is skipped
    assert again not in (first - 1, first)
