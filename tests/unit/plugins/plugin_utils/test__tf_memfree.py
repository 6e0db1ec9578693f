"""The MemFree line a start prints after evicting on each node."""

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_run import memfree_report

GIB = 1 << 30


def test_each_node_before_and_after():
    results = [{"item": "spark-head", "memory_before": {"mem_free": 10 * GIB}, "memory_after": {"mem_free": 12 * GIB},
                "evicted_bytes": 2 * GIB},
               {"item": "spark-worker", "memory_before": {"mem_free": 9 * GIB}, "memory_after": {"mem_free": 9 * GIB},
                "evicted_bytes": 0},
               {"item": "spark-x", "skipped": True}]
    assert memfree_report(results) == (
        "MemFree before -> after eviction: spark-head 10.0 -> 12.0 GiB (2.0 GiB of their page cache evicted); "
        "spark-worker 9.0 -> 9.0 GiB (0.0 GiB of their page cache evicted)")


def test_nothing_measured():
    assert memfree_report([]) == "MemFree not measured"
    assert memfree_report([{"item": "a", "memory_before": {}}]) == "MemFree not measured"
