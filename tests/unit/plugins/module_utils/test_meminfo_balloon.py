"""free_after_balloon: one judgment of MemFree after a balloon, for the engine role and glm53-ops."""

from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import free_after_balloon

GIB = 1 << 30


def test_an_inflated_balloon_counts_what_it_expected_to_free():
    result = {"balloon_bytes": GIB, "free_target": {"expected_free": 3 * GIB}, "memory_after": {"mem_free": GIB}}
    assert free_after_balloon(2 * GIB, result) == 3 * GIB


def test_an_inflated_balloon_without_an_expectation_falls_back_to_meminfo_after():
    assert free_after_balloon(2 * GIB, {"balloon_bytes": GIB, "memory_after": {"mem_free": 5 * GIB}}) == 5 * GIB


def test_a_balloon_that_had_nothing_to_do_keeps_the_larger():
    assert free_after_balloon(2 * GIB, {"balloon_bytes": 0, "free_target": {"expected_free": 4 * GIB}}) == 4 * GIB
    assert free_after_balloon(2 * GIB, {"balloon_bytes": 0, "free_target": {"expected_free": GIB}}) == 2 * GIB
    assert free_after_balloon(2 * GIB, None) == 2 * GIB
