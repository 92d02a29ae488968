"""The fault tests' ``fault`` fixture; the ledger it writes to is tests/fault_ledger.py."""

from __future__ import annotations

import pytest

from fault_ledger import LEDGER_PLUGIN, FaultLedger, FaultRecord


@pytest.fixture
def fault(request):
    """``fault(kind, name, injected, expected)`` -> a FaultRecord for this test; fill in ``observed``,
    ``results_lost`` and ``containers_leaked`` from what the test measured."""
    ledger: FaultLedger = request.config.pluginmanager.get_plugin(LEDGER_PLUGIN)

    def make(kind: str, name: str, injected: str, expected: str) -> FaultRecord:
        return ledger.add(request.node.nodeid, FaultRecord(kind=kind, name=name, injected=injected, expected=expected))

    return make
