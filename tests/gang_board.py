"""A gang's board in one process for tests: every node's latest post in one dict, as JSON (what XCom holds), and a
view per node (tests/core/run/runtime/test_gang.py, tests/airflow_plugin/test_node_routing.py)."""

from __future__ import annotations

import threading

from dlperf_core.run.runtime.gang import NodeState


class DictBoard:
    """Every node's latest post in one dict, as JSON (what XCom holds); a view per node."""

    def __init__(self):
        self.states: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.history: list[tuple[str, dict]] = []

    def view(self, node: str) -> NodeView:
        return NodeView(self, node)


class NodeView:
    def __init__(self, board: DictBoard, node: str):
        self.board, self.node = board, node

    def post(self, state: NodeState) -> None:
        with self.board.lock:
            self.board.states[self.node] = state.to_json()
            self.board.history.append((self.node, state.to_json()))

    def read(self, node: str) -> NodeState | None:
        with self.board.lock:
            posted = self.board.states.get(node)
        return None if posted is None else NodeState.from_json(posted)
