"""make test's cost accounting (benchmarks/_cost.py, _budget.py, test_cost.py): the stage
windows cut from the sampler's timeline, the budget's verdicts, and a module over its share
that does not say why. The sampler's readings themselves are the machine's (/proc/stat, the
lab nodes' cgroups): test_the_machine_reading_grows_with_work reads them for real."""

import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import _budget  # noqa: E402  pylint: disable=wrong-import-position
import _cost  # noqa: E402  pylint: disable=wrong-import-position
import test_cost  # noqa: E402  pylint: disable=wrong-import-position

TIMELINE = [
    {"t": 100.0, "busy": 1000.0, "nodes": {"1": 10.0}},
    {"t": 101.0, "busy": 1001.5, "nodes": {"1": 10.5}},
    {"t": 160.0, "busy": 1100.0, "nodes": {"1": 40.0, "2": 5.0}},
    {"t": 200.0, "busy": 1160.0, "nodes": {"1": 50.0, "2": 15.0}},
]
BUDGET = {"margin": 2, "module_share": 0.1, "stages": {"lint": 50, "integration+molecule": 1000}}


def test_a_stage_is_the_cpu_between_the_samples_at_its_start_and_end():
    assert _cost.span(TIMELINE, 100.5, 160.2) == (100.0, 35.0)
    rows = test_cost.stage_rows(TIMELINE, [("lint", 100.0, 160.0), ("integration+molecule", 160.0, 200.0)])
    assert rows == [{"stage": "lint", "wall": 60, "cpu": 100, "nodes": 35, "controller": 65},
                    {"stage": "integration+molecule", "wall": 40, "cpu": 60, "nodes": 20, "controller": 40}]


def test_an_older_make_tests_wall_table_gives_the_stage_windows():
    out = "...\nmake test: every stage passed\nsetup                   26 s\nlint                    46 s\ntotal  72 s\n"
    assert test_cost._stages_from_output(out, 1000.0) == [("setup", 1000.0, 1026.0), ("lint", 1026.0, 1072.0)]
    assert test_cost._stages_from_output("make test: lint failed after 3 s", 0) == []


def test_a_stage_over_its_budget_by_more_than_the_margin_fails_and_one_within_it_does_not():
    assert _budget.over_budget([{"stage": "lint", "cpu": 100}], BUDGET) == []
    message, = _budget.over_budget([{"stage": "lint", "cpu": 101}], BUDGET)
    assert "stage lint took 101 s of CPU, over its budget of 50 s by more than 100%" in message
    message, = _budget.over_budget([{"stage": "docs", "cpu": 3}], BUDGET)
    assert "stage docs (3 s of CPU) has no budget" in message


def test_a_module_over_its_share_must_say_why_in_its_docstring(tmp_path):
    (tmp_path / "tests" / "integration").mkdir(parents=True)
    (tmp_path / "tests/integration/test_big.py").write_text('"""Big.\n\nCost: it deploys both paths."""\n')
    (tmp_path / "tests/integration/test_quiet.py").write_text('"""Big, and silent about it."""\n')
    rows = [{"module": "tests/integration/test_big.py", "controller": 80, "nodes": 40},
            {"module": "tests/integration/test_quiet.py", "controller": 80, "nodes": 40},
            {"module": "tests/integration/test_small.py", "controller": 50, "nodes": 40}]
    message, = _budget.unexplained_modules(rows, BUDGET, str(tmp_path))
    assert message.startswith("tests/integration/test_quiet.py took 120 s of CPU, over 10% of the lab stage's budget")


@pytest.mark.parametrize("text, error", [
    ("margin: 0.5\nmodule_share: 0.1\nstages: {lint: 5}\n", "margin: expected a number >= 1"),
    ("margin: 2\nmodule_share: 2\nstages: {lint: 5}\n", "module_share: expected a number in (0, 1]"),
    ("margin: 2\nmodule_share: 0.1\nstages: {lint: -1}\n", "stages.lint: expected CPU seconds > 0"),
])
def test_a_wrong_budget_file_is_refused_naming_the_key(tmp_path, text, error):
    (tmp_path / "b.yml").write_text(text)
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace("]", r"\]")):
        _budget.load(str(tmp_path / "b.yml"))


def test_the_budget_file_names_every_stage_of_make_test():
    budget = _budget.load(str(REPO / "tests" / "cost_budget.yml"))
    makefile = (REPO / "Makefile").read_text()
    stages = next(line for line in makefile.splitlines() if line.startswith("TEST_STAGES := ")).split()[2:]
    assert sorted(budget["stages"]) == sorted(s for s in stages if s != "lab-start")


def test_the_machine_reading_grows_with_work():
    before = _cost.machine_busy_s()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert _cost.machine_busy_s() - before >= 0.25
    assert isinstance(_cost.NodeMeter().read(), dict)
    assert os.path.exists("/proc/stat")
