"""The simulated TensorFold's memory at load (lab/sim/tensorfold/src/tensorfold/sim/memory.py):
what "the driver" answers (a fake glm53-lab-gpud socket, else /proc/meminfo), the kit's slot
rule on it with the lab's scale, both ranks agreeing on the fewest, and the boot lines the
kit and the collection read."""

import os
import sys

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _readiness as rd
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.fake_gpu_driver import GIB, MIB, FakeDriver, figures

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                   "lab", "sim", "tensorfold", "src")
sys.path.insert(0, SRC)

from tensorfold.sim import memory  # noqa: E402  pylint: disable=wrong-import-position

SLOT, RESERVE = 256 * MIB, 896 * MIB  # the lab's defaults
WEIGHTS = 224 * MIB  # the lab hub's tr3-4bpw shards (3 x 64 MiB) and the DFlash2 drafter (32 MiB)
SESSION = 64 * MIB  # the C8 profile's 2 GiB session store on a 4 GiB node (2 GiB x 4/128)
NEED_8 = WEIGHTS + SESSION + 7 * SLOT + RESERVE  # 2976 MiB: under the lab inventory's MEM_GATE_GIB=3


@pytest.fixture(autouse=True)
def no_lab_knobs(monkeypatch):
    for key in list(os.environ):
        if key.startswith("GLM53_"):
            monkeypatch.delenv(key)


# --- the rule ---------------------------------------------------------------------------------------

def test_the_readme_arithmetic_on_a_4_gib_node():
    assert NEED_8 == 2976 * MIB
    node = 4 * GIB
    # A node after the deploy (weights evicted) uses 0.2-0.6 GiB: all 8 fit, up to ~1.1 GiB used.
    for used in (0, 200 * MIB, 600 * MIB, node - NEED_8):
        assert memory.fit(8, node - used, WEIGHTS, SESSION, SLOT, RESERVE) == 8, used
    assert memory.fit(8, NEED_8 - 1, WEIGHTS, SESSION, SLOT, RESERVE) == 7
    # Every further 256 MiB used costs a slot; about 1 GiB of stray page cache costs slots
    # even on an otherwise empty node.
    assert memory.fit(8, NEED_8 - SLOT, WEIGHTS, SESSION, SLOT, RESERVE) == 7
    assert memory.fit(8, NEED_8 - SLOT - 1, WEIGHTS, SESSION, SLOT, RESERVE) == 6
    # 1 GiB of stray page cache on an otherwise empty node leaves exactly the gate (3 GiB): 8 fit;
    # beside the 300 MiB a deployed node uses, it costs a slot, and 1.5 GiB costs three.
    assert memory.fit(8, node - GIB, WEIGHTS, SESSION, SLOT, RESERVE) == 8
    assert memory.fit(8, node - 300 * MIB - GIB, WEIGHTS, SESSION, SLOT, RESERVE) == 7
    assert memory.fit(8, node - 300 * MIB - 3 * GIB // 2, WEIGHTS, SESSION, SLOT, RESERVE) == 5
    # Slot 0 always, whatever is free; one slot asked, one served.
    assert memory.fit(8, 0, WEIGHTS, SESSION, SLOT, RESERVE) == 1
    assert memory.fit(1, 100 * GIB, 0, 0, SLOT, RESERVE) == 1
    assert memory.fit(0, 100 * GIB, 0, 0, SLOT, RESERVE) == 1


def test_both_ranks_serve_the_fewest_that_fit_on_either():
    def rank(fits, free=3 * GIB):
        return {"fits": fits, "free": free, "need": WEIGHTS, "session": SESSION}

    assert memory.agree(8, [rank(8), rank(8)]) == (8, None)
    assert memory.agree(8, [rank(8), rank(5)]) == (5, 1)
    assert memory.agree(8, [rank(3), rank(5)]) == (3, 0)
    assert memory.agree(8, [rank(4, free=2 * GIB), rank(4, free=GIB)]) == (4, 1)  # the one with less left
    assert memory.agree(8, [rank(6), None]) == (6, 0)  # an older rank 1 sends no memory
    assert memory.agree(8, [None, None]) == (8, None)
    assert memory.agree(1, [rank(1), rank(1)]) == (1, None)


# --- the driver --------------------------------------------------------------------------------------

def test_the_driver_answers_on_its_socket():
    with FakeDriver(figures(3 * GIB, cached=200 * MIB)) as driver:
        assert memory.ask_driver(driver.path) == {"total": 4 * GIB, "free": 3 * GIB, "cached": 200 * MIB,
                                                  "available": 3 * GIB + 200 * MIB}
        assert memory.query(driver.path) == (memory.ask_driver(driver.path), driver.path)
        driver.answer = b'{"total": 1}\n'  # a driver that says too little
        assert memory.ask_driver(driver.path) is None
        driver.answer = b"not json"
        assert memory.ask_driver(driver.path) is None
    assert memory.ask_driver(driver.path) is None  # gone


def test_without_the_socket_memfree_of_proc_meminfo():
    figures_, source = memory.query("/nonexistent/gpu.sock")
    assert source == "/proc/meminfo MemFree, no /nonexistent/gpu.sock"
    with open("/proc/meminfo") as handle:
        text = handle.read()
    assert figures_["total"] == memory.from_meminfo(text)["total"] > 0
    assert memory.from_meminfo("MemTotal:        4194304 kB\nMemFree:         3145728 kB\nCached:"
                               "           716800 kB\nMemAvailable:    3829321 kB\nHugePages_Total:       7\n") == {
        "total": 4 * GIB, "free": 3 * GIB, "cached": 700 * MIB, "available": 3829321 * 1024}


def test_measure_scales_the_session_store_and_loads_copy_or_mapped(monkeypatch):
    with FakeDriver(figures(NEED_8, cached=500 * MIB)) as driver:
        monkeypatch.setenv("GLM53_LAB_GPU_SOCK", driver.path)
        cold = memory.measure(8, 2.0, WEIGHTS, 0)
        assert (cold["session"], cold["need"], cold["slot"], cold["reserve"], cold["fits"]) == (
            SESSION, WEIGHTS, SLOT, RESERVE, 8)
        assert (cold["free"], cold["total"], cold["cached"], cold["source"]) == (NEED_8, 4 * GIB, 500 * MIB,
                                                                                 driver.path)
        # Copy (the default): warm weights are still copied, so their cache is pure cost.
        assert memory.measure(8, 2.0, WEIGHTS, WEIGHTS)["need"] == WEIGHTS
        monkeypatch.setenv("GLM53_LAB_LOAD", "mapped")
        warm = memory.measure(8, 2.0, WEIGHTS, WEIGHTS - MIB)
        assert warm["need"] == MIB and warm["fits"] == 8
        monkeypatch.setenv("GLM53_LAB_LOAD", "copy")
        monkeypatch.setenv("GLM53_LAB_SLOT_MIB", "512")
        monkeypatch.setenv("GLM53_LAB_RESERVE_MIB", "0.5")
        small = memory.measure(8, 0, WEIGHTS, 0)
        assert (small["slot"], small["reserve"], small["session"]) == (512 * MIB, MIB // 2, 0)
        driver.answer = figures(NEED_8, total=128 * GIB)  # a GB10: the store at its own size
        assert memory.measure(8, 2.0, WEIGHTS, 0)["session"] == 2 * GIB
        monkeypatch.setenv("GLM53_LAB_LOAD", "mmap")
        with pytest.raises(SystemExit):
            memory.measure(8, 2.0, WEIGHTS, 0)


# --- the lines ---------------------------------------------------------------------------------------

def test_the_lines_say_what_was_free_and_what_it_went_to():
    m = {"total": 4 * GIB, "free": 2710 * MIB, "cached": 1350 * MIB, "source": "/run/glm53-lab/gpu.sock",
         "weights": WEIGHTS, "resident": WEIGHTS, "need": WEIGHTS, "session": SESSION, "slot": SLOT,
         "reserve": RESERVE, "fits": 6}
    line = memory.shortfall_line(8, 6, 11.0, 2.0, 1, m)
    assert line == ("[tensorfold] GLM53_TF_BATCH=8: only 6 sequence(s) fit with GLM53_TF_BATCH_RESERVE_GB=11 kept "
                    "free (rank 1 had 2710 MiB free of 4096 MiB at load, with 1350 MiB of page cache counted as "
                    "used, as on GB10; lab scale: 256 MiB a sequence, 896 MiB kept free, 224 MiB of weights, "
                    "64 MiB of session store) and the session store's 2.0 GiB; serving that many")
    assert rd.log_shortfall(line)["fit"] == 6 and rd.log_shortfall(line)["requested"] == 8
    assert memory.memory_line(1, m, 8) == (
        "[tensorfold] rank 1: 2710 MiB free of 4096 MiB at load (page cache 1350 MiB, counted as used on GB10; "
        "from /run/glm53-lab/gpu.sock); 6 of 8 slot(s) fit: weights 224 MiB + session store 64 MiB + 256 MiB a "
        "further slot + 896 MiB reserve")
    mapped = dict(m, need=0)
    assert "weights 0 MiB not in the page cache yet (of 224 MiB, GLM53_LAB_LOAD=mapped)" in memory.memory_line(
        0, mapped, 8)
    # Nothing here may read as the kit's slot count: only the context line says "request slot(s)".
    assert rd.log_slots(memory.memory_line(1, m, 8) + "\n" + line) is None
