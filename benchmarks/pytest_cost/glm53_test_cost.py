# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest plugin of benchmarks/test_cost.py: one JSON line per test (setup, call and teardown
together) with its wall time, this session's controller CPU (the pytest process and every
child it has reaped: ansible-runner, ansible-playbook and its forks, ssh) and the CPU of its lab's
nodes, to $GLM53_TEST_COST_DIR/tests-<lab>-<pid>.jsonl. Loaded with
`-p glm53_test_cost` (test_cost.py puts this folder on PYTHONPATH), so it measures any tree."""

import json
import os
import resource
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _cost  # noqa: E402  pylint: disable=wrong-import-position

_OUT = os.environ.get("GLM53_TEST_COST_DIR")
_LAB = os.environ.get("GLM53_LAB_ID", "1")
_METER = _cost.NodeMeter()


def _controller_s():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _nodes_s():
    return _METER.read().get(int(_LAB), 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    if not _OUT:
        yield
        return
    t0, c0, n0 = time.time(), _controller_s(), _nodes_s()
    yield
    row = {"lab": _LAB, "nodeid": item.nodeid, "module": item.nodeid.split("::", 1)[0],
           "wall": round(time.time() - t0, 2), "controller": round(_controller_s() - c0, 2),
           "nodes": round(_nodes_s() - n0, 2)}
    os.makedirs(_OUT, exist_ok=True)
    with open(os.path.join(_OUT, "tests-%s-%d.jsonl" % (_LAB, os.getpid())), "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
