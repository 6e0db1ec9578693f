from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._engine_memory import memory_gates, memory_report

GIB = 1 << 30


def _named(node, total, free):
    return {"item": node, "memory_before": {"mem_total": total, "mem_free": free},
            "memory_after": {"mem_total": total, "mem_free": free}, "evicted_bytes": 0}


def test_a_fraction_gates_each_node_by_its_own_memtotal_rounded_up():
    named = [_named("head", 4 * GIB, 3 * GIB), _named("w1", 121 * GIB + GIB // 2, 100 * GIB)]
    assert memory_gates(named, gate_gib=108, fraction=0.82) == {"head": 3.28, "w1": 99.63}


def test_without_a_fraction_every_node_has_the_one_gate():
    named = [_named("head", 4 * GIB, 3 * GIB), _named("w1", 4 * GIB, 3 * GIB)]
    assert memory_gates(named, gate_gib=3, fraction=0) == {"head": 3.0, "w1": 3.0}


def test_the_report_judges_each_node_against_its_own_gate():
    named = [_named("head", 4 * GIB, int(3.3 * GIB)), _named("w1", 8 * GIB, int(3.3 * GIB))]
    report = memory_report(named, [], {"head": 3.28, "w1": 6.56})
    assert [item["node"] for item in report["short"]] == ["w1"]
    assert "(the engine waits for 6.56 GiB)" in report["lines"][1]
    assert "(the engine waits for 3.28 GiB)" in report["lines"][0]
