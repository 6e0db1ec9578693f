"""Fixtures shared by the tests that build real virtual environments (module_utils and modules)."""

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import wheelhouse


@pytest.fixture(scope="session")
def interpreter():
    """A real Python with ensurepip on this controller: Debian's, else the one under the test venv."""
    found = wheelhouse.venv_python()
    if found is None:
        pytest.fail("no Python 3.10+ with ensurepip on this controller")
    return found
