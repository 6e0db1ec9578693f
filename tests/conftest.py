"""Shared by every test run (unit and lab end-to-end).

- Makes the collection importable by its FQCN from the checkout.
- No silent skips: the summary always gives the number of skipped tests, and under
  CI=true (.ci/run sets it) a skip fails the run unless tests/skip_allowlist.txt lists
  the test with a reason. A test that needs a host tool fails naming it (make doctor),
  it does not skip.
"""

import os
import sys
from pathlib import Path

import pytest

_COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".collections")
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

ALLOWLIST = Path(__file__).with_name("skip_allowlist.txt")
_SKIPS = []  # (nodeid, reason) of every skipped test, in order


def read_allowlist(text: str) -> dict:
    """{node id: reason} from the allow-list text: one `node-id  # reason` a line; blank
    lines and lines starting with # are comments. An entry without a reason is refused."""
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        nodeid, _sep, reason = line.partition(" # ")
        if not nodeid.strip() or not reason.strip():
            raise pytest.UsageError(f"{ALLOWLIST.name}:{number}: expected `node-id  # reason`, found {line!r}")
        entries[nodeid.strip()] = reason.strip()
    return entries


def allowed(nodeid: str, entries: dict) -> bool:
    """True when the allow-list names this test: its node id, or the id without its
    parameters, or a file or class it belongs to."""
    base = nodeid.split("[", 1)[0]
    return any(nodeid == e or base == e or nodeid.startswith(e + "::") for e in entries)


def _strict() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        _SKIPS.append((report.nodeid, reason))


def _not_allowed():
    entries = read_allowlist(ALLOWLIST.read_text()) if ALLOWLIST.exists() else {}
    return [(nodeid, reason) for nodeid, reason in _SKIPS if not allowed(nodeid, entries)]


def pytest_sessionfinish(session, exitstatus):
    if _strict() and _not_allowed() and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    refused = _not_allowed()
    terminalreporter.write_sep("-", f"skips: {len(_SKIPS)} ({len(_SKIPS) - len(refused)} on {ALLOWLIST.name})")
    for nodeid, reason in refused:
        verdict = "FAILS THE RUN (CI=true)" if _strict() else "would fail under CI=true"
        terminalreporter.write_line(f"skipped, not allow-listed, {verdict}: {nodeid}: {reason}")
