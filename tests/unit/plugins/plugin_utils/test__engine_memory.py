from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._engine_memory import (
    balloon_targets, memory_gates, memory_report, short_message,
)

GIB = 1 << 30


def named(node, before, after, evicted):
    return {"item": node, "memory_before": {"mem_free": before}, "memory_after": {"mem_free": after},
            "evicted_bytes": evicted}


def balloon(node, before, touched, expected, target):
    return {"item": node, "memory_before": {"mem_free": before}, "memory_after": {"mem_free": before},
            "balloon_bytes": touched, "free_target": {"bytes": target, "expected_free": expected,
                                                      "reached": expected >= target}}


def test_each_node_gets_its_line_and_a_balloon_only_where_it_ran():
    report = memory_report(
        [named("head", 3 * GIB, int(3.4 * GIB), int(0.4 * GIB)), named("worker", 2 * GIB, int(2.2 * GIB), GIB // 5)],
        [{"item": "head", "skipped": True},
         balloon("worker", int(2.2 * GIB), GIB, int(3.3 * GIB), int(3.25 * GIB))], gate_gib=3)
    assert report["lines"] == [
        "head: MemFree 3.0 GiB -> 3.4 GiB after evicting 0.4 GiB it names (the engine waits for 3 GiB)",
        "worker: MemFree 2.0 GiB -> 2.2 GiB after evicting 0.2 GiB it names -> 3.3 GiB after a 1.0 GiB balloon "
        "(page cache no name reaches: image layers, other files) (the engine waits for 3 GiB)"]
    assert report["short"] == []


def test_a_node_the_balloon_cannot_bring_to_the_gate_is_short_and_the_message_names_it():
    report = memory_report([named("worker", GIB, GIB, 0)],
                           [balloon("worker", GIB, GIB // 2, int(1.5 * GIB), int(3.25 * GIB))], gate_gib=3)
    assert report["short"] == [{"node": "worker", "free": int(1.5 * GIB), "gate": 3 * GIB}]
    message = short_message(report, "tensorfold_env_overrides.MEM_GATE_GIB")
    assert "3 GiB" in message and "worker has 1.5 GiB" in message
    assert "tensorfold_env_overrides.MEM_GATE_GIB" in message and "Nothing was started" in message


def test_no_gate_nothing_is_short_and_nothing_measured_says_so():
    assert memory_report([named("n", GIB, GIB, 0)], None, gate_gib=0)["short"] == []
    assert memory_report([], [])["msg"] == "MemFree not measured"
    assert memory_report([{"item": "a", "memory_before": {}}])["msg"] == "a: MemFree 0.0 GiB -> 0.0 GiB after " \
        "evicting 0.0 GiB it names"


def test_evict_paths_are_each_nodes_model_folders_and_the_paths_own():
    from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._engine_memory import evict_paths
    snap = "/home/spark/.cache/huggingface/hub/models--zai--GLM/snapshots/%s" % ("a" * 40)
    draft = "/home/spark/.cache/huggingface/hub/models--zai--MTP/snapshots/%s/" % ("b" * 40)
    paths = evict_paths({"head": {"models": [{"host_path": snap}, {"host_path": draft}, {"host_path": snap}]},
                         "worker": {"models": []}, "odd": None}, ["~/.cache/glm53-tf/prepared", None, "~/s"])
    assert paths == {
        "head": ["/home/spark/.cache/huggingface/hub/models--zai--GLM", "/home/spark/.cache/huggingface/hub/models--zai--MTP",
                 "~/.cache/glm53-tf/prepared", "~/s"],
        "worker": ["~/.cache/glm53-tf/prepared", "~/s"], "odd": ["~/.cache/glm53-tf/prepared", "~/s"]}


def test_balloon_targets_per_node_from_each_nodes_memtotal():
    results = [{"item": "head", "memory_before": {"mem_free": 3 * GIB, "mem_total": 4 * GIB}},
               {"item": "worker", "memory_before": {"mem_free": 3 * GIB, "mem_total": 8 * GIB}},
               {"item": "skipped", "skipped": True}]
    # vLLM at 0.82: the gate, then three quarters of what it leaves (rounded up to 0.01 GiB).
    gates = memory_gates(results, fraction=0.82)
    assert gates == {"head": 3.28, "worker": 6.56}
    assert balloon_targets(results, gates, margin_gib=0.25) == {"head": 3.82, "worker": 7.64}
    # The kit's fixed gate: the same rule, from each node's MemTotal.
    assert balloon_targets(results, memory_gates(results, gate_gib=3), margin_gib=0.25) == {"head": 3.75, "worker": 6.75}
