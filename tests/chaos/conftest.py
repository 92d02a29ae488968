"""The chaos tests record their faults in the fault ledger of tests/faults/ (the ``fault`` fixture and the session
plugin that prints and writes the ledger)."""

from faults.conftest import fault, pytest_configure  # noqa: F401 - pytest finds them here
