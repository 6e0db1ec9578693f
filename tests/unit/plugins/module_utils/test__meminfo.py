from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
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
