"""Unit tests run on four pytest-xdist workers (make unit). Tests that must not run beside
each other are grouped onto one worker (--dist loadgroup):

- page_cache: they measure or perturb the page cache (fincore and mincore readings, a
  memory balloon, residency of simulated weights); beside each other a balloon would
  evict the pages another test is counting. Marked `page_cache` too (`make unit
  UNIT_SELECT=page_cache` runs them alone); `make test` runs every unit test before the
  lab tests, never beside them (the lab's engines and evictions move the same page cache).
- wheelhouse: they build the same wheelhouse under tests/output/wheelhouse (a session
  fixture per worker); two workers would write it at once.
"""

from pathlib import Path

import pytest

GROUPS = {
    "page_cache": ("test__page_cache.py", "test_page_cache_evict.py", "test_tensorfold_residency.py",
                   "test_tensorfold_sim.py"),
    "wheelhouse": ("test__venv.py", "test__wheel_lock.py", "test__wheelhouse.py", "test_offline_venv.py",
                   "test_offline_venv_lock.py"),
}


def pytest_collection_modifyitems(items):
    by_file = {name: group for group, names in GROUPS.items() for name in names}
    for item in items:
        group = by_file.get(Path(str(item.fspath)).name)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
        if group == "page_cache":
            item.add_marker(pytest.mark.page_cache)
