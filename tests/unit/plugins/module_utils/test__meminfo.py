from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
    balloon_target,
    memory_summary,
    parse_meminfo,
    read_meminfo,
)

SAMPLE = """MemTotal:       128157056 kB
MemFree:        113246208 kB
MemAvailable:   120586240 kB
Cached:           6291456 kB
HugePages_Total:       0
Broken line without colon
Weird:           notanumber kB
"""


def test_parse_converts_kb_to_bytes_and_keeps_counts():
    info = parse_meminfo(SAMPLE)
    assert info["MemTotal"] == 128157056 * 1024
    assert info["MemFree"] == 113246208 * 1024
    assert info["HugePages_Total"] == 0
    assert "Weird" not in info


def test_summary_picks_the_three_reported_fields():
    summary = memory_summary(parse_meminfo(SAMPLE))
    assert summary == {
        "mem_total": 128157056 * 1024,
        "mem_free": 113246208 * 1024,
        "mem_available": 120586240 * 1024,
        "cached": 6291456 * 1024,
    }


def test_read_live_meminfo_has_positive_values():
    info = read_meminfo()
    assert info["MemTotal"] > 0
    assert 0 < info["MemAvailable"] <= info["MemTotal"]


GIB = float(1 << 30)


def test_a_fixed_gate_leaves_room_for_what_is_read_back_too():
    # The kit waits for MEM_GATE_GIB (3 GiB in the lab): a worker ballooned to 3.3 GiB read 0.3 GiB
    # back and sat 3 MB under it. Three quarters of the 1 GiB the gate leaves: 3.75 GiB.
    assert balloon_target(3 * GIB, 4 * GIB, 0.25 * GIB) == 3.75 * GIB
    # On a Spark, MEM_GATE_GIB=108 of 121.7 GiB: 10.28 GiB of room.
    assert round((balloon_target(108 * GIB, 121.7 * GIB, 0.25 * GIB) - 108 * GIB) / GIB, 2) == 10.28


def test_a_share_of_memtotal_gate_leaves_room_for_the_starts_own_reads():
    # The lab's vLLM rank: 0.82 x 4 GiB = 3.28 GiB; its start read 0.33 GiB back after a balloon
    # to 3.53 GiB and failed vLLM's own check 0.01 GiB short; a head ballooned to 3.7 GiB (half of
    # the headroom, 3.64) read 0.43 GiB back and failed it at 3.27. Three quarters of the 0.72 GiB
    # the gate leaves: 3.82 GiB, which that read-back leaves over the gate.
    target = balloon_target(3.28 * GIB, 4 * GIB, 0.25 * GIB)
    assert abs(target - 3.82 * GIB) < 1e6 and target - 0.43 * GIB >= 3.28 * GIB
    # On a Spark (121.7 GiB, 0.82): about 16 GiB of room beside the 99.8 GiB vLLM takes.
    spark = balloon_target(0.82 * 121.7 * GIB, 121.7 * GIB, 0.25 * GIB)
    assert round((spark - 0.82 * 121.7 * GIB) / GIB, 2) == 16.43
    # A margin larger than that share still wins; a gate at or above MemTotal adds only the margin.
    assert balloon_target(3.28 * GIB, 4 * GIB, 0.6 * GIB) == 3.88 * GIB
    assert balloon_target(4 * GIB, 4 * GIB, 0.25 * GIB) == 4.25 * GIB
