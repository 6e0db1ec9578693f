"""The simulated vLLM's memory at load (lab/sim/vllm/src/vllm/sim/memory.py): what "the
driver" answers (a fake glm53-lab-gpud socket, else /proc/meminfo), vLLM's start-up check
of --gpu-memory-utilization against the free memory, and the KV cache left after the
weights, at the lab's scale (4 GiB nodes)."""

import os
import sys

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.fake_gpu_driver import GIB, MIB, FakeDriver, figures
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.vllm_sim import SRC, make_model

sys.path.insert(0, SRC)

from vllm.sim import memory  # noqa: E402  pylint: disable=wrong-import-position

NODE = 4 * GIB  # a lab node (lab/sparklab/layout.py NODE_MEMORY)
RECIPE_UTIL = 0.82


def test_the_driver_answers_on_its_socket():
    with FakeDriver(figures(3 * GIB, cached=200 * MIB)) as driver:
        answer, source = memory.query(driver.path)
        assert answer == {"total": NODE, "free": 3 * GIB, "cached": 200 * MIB, "available": 3 * GIB + 200 * MIB}
        assert source == driver.path
        driver.answer = b'{"total": 1}\n'  # says too little: not an answer
        assert memory.ask_driver(driver.path) is None
    assert memory.ask_driver(driver.path) is None  # gone


def test_without_the_socket_memfree_of_proc_meminfo():
    answer, source = memory.query("/nonexistent/gpu.sock")
    assert source == "/proc/meminfo MemFree (no /nonexistent/gpu.sock)"
    assert answer["total"] > 0 and 0 < answer["free"] <= answer["total"]
    assert memory.meminfo("MemTotal:        4194304 kB\nMemFree:         3145728 kB\nCached:           716800 kB\n"
                          "MemAvailable:    3829321 kB\nHugePages_Total:       7\n") == {
        "total": NODE, "free": 3 * GIB, "cached": 700 * MIB, "available": 3829321 * 1024}


def test_the_recipes_utilization_on_a_lab_node():
    """0.82 of a 4 GiB node is 3.28 GiB: a node using up to ~740 MiB (page cache counted as
    used, as on a GB10) starts; one with more is refused with vLLM's message."""
    memory.startup_check(RECIPE_UTIL, figures(NODE - 700 * MIB))
    memory.startup_check(RECIPE_UTIL, figures(RECIPE_UTIL * NODE + 1))  # exactly what it wants
    with pytest.raises(ValueError) as caught:
        memory.startup_check(RECIPE_UTIL, figures(NODE - 800 * MIB, cached=600 * MIB))
    assert str(caught.value) == (
        "Free memory on device cuda:0 (3.22/4.0 GiB) on startup is less than desired GPU memory utilization "
        "(0.82, 3.28 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    # On a GB10 (121.69 GiB usable) the same rule wants 99.79 GiB free: warm weights fail it.
    spark = 121.69 * GIB
    with pytest.raises(ValueError, match=r"\(30\.0/121\.69 GiB\) on startup .* \(0\.82, 99\.79 GiB\)"):
        memory.startup_check(RECIPE_UTIL, figures(30 * GIB, total=spark))


def test_the_kv_cache_gets_what_the_weights_leave():
    node = figures(NODE)
    kv_bytes, tokens = memory.kv_budget(RECIPE_UTIL, node, 112 * MIB, 128 * MIB, 768, 262144)
    assert kv_bytes == int(RECIPE_UTIL * NODE) - 240 * MIB and tokens == kv_bytes // 768
    with pytest.raises(ValueError, match=r"^No available memory for the cache blocks\. Try increasing "):
        memory.kv_budget(0.05, node, 112 * MIB, 128 * MIB, 768, 262144)
    with pytest.raises(ValueError) as caught:
        memory.kv_budget(0.1, node, 112 * MIB, 128 * MIB, 768, 262144)
    assert str(caught.value).startswith("To serve at least one request with the models's max seq len (262144), "
                                        "(0.19 GiB KV cache is needed, which is larger than the available KV cache "
                                        "memory (0.17 GiB). Based on the available memory, the estimated maximum "
                                        "model length is 231560.")


def test_the_weights_are_the_safetensors_of_the_model(tmp_path):
    model = make_model(tmp_path, shard=1000)
    with open(os.path.join(model, "notes.txt"), "w") as handle:
        handle.write("not weights")
    os.symlink(os.path.join(model, "model-00001-of-00002.safetensors"), os.path.join(model, "linked.safetensors"))
    files = memory.weight_files(model)
    assert [os.path.basename(path) for path in files] == [
        "linked.safetensors", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert memory.weights_bytes(files) == 3000
    assert memory.weight_files(str(tmp_path / "missing")) == []
