"""The chief agent's check of its rendezvous port."""

from __future__ import annotations

import socket

from pedl.agent.rendezvous import rendezvous_port_problem
from pedl.common.ports import free_port


def test_a_free_port_of_the_chief_is_fine_and_other_nodes_are_not_checked() -> None:
    port = free_port()
    assert rendezvous_port_problem({"NODE_RANK": "0", "NNODES": "2", "MASTER_PORT": str(port)}) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert rendezvous_port_problem({"NODE_RANK": "1", "NNODES": "2", "MASTER_PORT": str(port)}) is None
        assert rendezvous_port_problem({"NODE_RANK": "0", "NNODES": "1", "MASTER_PORT": str(port)}) is None
        problem = rendezvous_port_problem({"NODE_RANK": "0", "NNODES": "2", "MASTER_PORT": str(port)})
    assert problem is not None and f"rendezvous port {port} (MASTER_PORT) is in use" in problem


def test_a_closed_connection_in_time_wait_does_not_make_a_port_busy() -> None:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server side closes first: its end waits in TIME_WAIT
        client.close()
    assert rendezvous_port_problem({"NODE_RANK": "0", "NNODES": "2", "MASTER_PORT": str(port)}) is None


def test_without_the_variables_there_is_nothing_to_check() -> None:
    assert rendezvous_port_problem({}) is None
    assert rendezvous_port_problem({"NODE_RANK": "0", "NNODES": "2", "MASTER_PORT": "x"}) is None
