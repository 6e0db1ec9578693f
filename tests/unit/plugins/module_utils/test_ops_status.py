"""What status.yml shows (_ops_status): vLLM's running and waiting sequences from /metrics, and
the status as a table for people."""

import copy

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_status import GIB, table, vllm_sequences

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="glm-5.3-flash-nvfp4-sm121"} 2.0
vllm:num_requests_running{engine="1",model_name="glm-5.3-flash-nvfp4-sm121"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="glm-5.3-flash-nvfp4-sm121"} 3.0
vllm:num_requests_waiting_by_reason{reason="capacity"} 7.0
vllm:num_requests_swapped 9.0
vllm:prompt_tokens_total 1.2e+04
"""


# -- vllm_sequences -------------------------------------------------------------------------------


def test_vllm_sequences_sums_every_engine():
    assert vllm_sequences(METRICS) == {"running": 3, "waiting": 3}


def test_vllm_sequences_without_labels_and_in_exponent_form():
    assert vllm_sequences("vllm:num_requests_running 1e+00\nvllm:num_requests_waiting 0\n") == {
        "running": 1, "waiting": 0}


def test_vllm_sequences_one_kind_only():
    assert vllm_sequences("vllm:num_requests_waiting{a=\"b\"} 4.0\n") == {"waiting": 4}


def test_vllm_sequences_none_without_the_gauges():
    assert vllm_sequences(None) is None
    assert vllm_sequences("") is None
    assert vllm_sequences("# HELP vllm:num_requests_running x\nvllm:prompt_tokens_total 5\n") is None


# -- table ----------------------------------------------------------------------------------------


def status():
    return {
        "path": "vllm", "url": "http://127.0.0.1:8000",
        "health": {"status": 200, "body": "", "error": None},
        "sequences": {"running": 2, "waiting": 1},
        "nodes": [
            {"node": "spark-head", "rank": 0, "container": "glm53-vllm", "state": "running",
             "started_at": "2026-12-02T07:00:02.123456789Z", "error": None,
             "mem_available": 40 * GIB, "mem_free": 12.5 * GIB,
             "disk": [{"path": "/home/spark", "free": 300 * GIB, "size": 900 * GIB}],
             "links": {"enp1s0f1np1": {"operstate": "up", "carrier": "1"},
                       "enP2p1s0f1np1": {"operstate": "down", "carrier": None}}},
            {"node": "spark-worker", "rank": 1, "container": "glm53-vllm", "state": "unreachable",
             "started_at": None, "error": "ssh: timed out", "mem_available": None, "mem_free": None,
             "disk": [], "links": {}},
        ],
        "watchdog": {"schedule": "systemd", "active": True, "disabled": False, "halted": None, "fails": 0,
                     "last_heals": [], "log": []},
    }


def test_table_header_and_one_row_per_node():
    lines = table(status())
    assert lines[0] == "path vllm at http://127.0.0.1:8000: /health 200"
    assert lines[1] == "sequences: {'running': 2, 'waiting': 1}"
    assert lines[2].split() == ["node", "rank", "container", "state", "started", "MemAvail", "MemFree", "disk",
                                "free", "links"]
    head, worker = lines[3], lines[4]
    assert head.split() == ["spark-head", "0", "glm53-vllm", "running", "2026-12-02T07:00:02.123456789Z", "40.0",
                            "12.5", "300.0", "enP2p1s0f1np1=down", "enp1s0f1np1=up"]
    assert worker.split() == ["spark-worker", "1", "glm53-vllm", "unreachable", "-", "-", "-", "-", "-"]
    assert lines[5] == "watchdog: systemd, fail count 0"
    assert len(lines) == 6


def test_table_columns_line_up_under_the_header():
    one = status()
    one["nodes"][1]["state"] = "exited"
    lines = table(one)
    header = lines[2]
    for row in lines[3:5]:
        # The right-aligned columns end where their headings end.
        for heading in ("MemAvail", "MemFree", "disk free"):
            end = header.index(heading) + len(heading)
            assert row[end] == " " and row[end - 1] != " ", (heading, row)
        assert row[header.index("links"):].split()[0] in ("enP2p1s0f1np1=down", "-")


def test_table_disabled_halted_and_heals():
    one = status()
    one["watchdog"].update(disabled=True, fails=2, halted="2026-12-02T08:00:00Z heal budget spent",
                           last_heals=[{"utc": "2026-12-02T07:30:00Z", "reason": "canary timed out",
                                        "result": "ready"},
                                       {"utc": "2026-12-02T07:50:00Z", "reason": "rank 1 exited",
                                        "result": "failed"}])
    lines = table(one)
    assert lines[5] == ("watchdog: systemd, fail count 2, DISABLED (stop.yml), "
                        "halted: 2026-12-02T08:00:00Z heal budget spent")
    assert lines[6:] == ["  heal 2026-12-02T07:30:00Z: canary timed out -> ready",
                         "  heal 2026-12-02T07:50:00Z: rank 1 exited -> failed"]


def test_table_watchdog_not_installed_or_inactive():
    one = status()
    one["watchdog"].update(schedule=None, active=False)
    assert table(one)[5] == "watchdog: not installed, fail count 0"
    two = status()
    two["watchdog"].update(schedule="cron", active=False)
    assert table(two)[5] == "watchdog: cron (inactive), fail count 0"
    assert "DISABLED" not in table(two)[5]


def test_table_health_error_and_no_sequences():
    one = status()
    one["health"] = {"status": None, "body": None, "error": "connection refused"}
    one["sequences"] = None
    lines = table(one)
    assert lines[0] == "path vllm at http://127.0.0.1:8000: /health connection refused"
    assert lines[1] == "sequences: none reported"


def test_table_tensorfold_slots():
    one = copy.deepcopy(status())
    one["path"] = "tensorfold"
    del one["sequences"]
    one["slots"] = {"wanted": 4, "log": 4, "health": 3}
    lines = table(one)
    assert lines[1] == "slots: 4 from the rank-0 log, 3 from /health (want 4)"
    assert not any(line.startswith("sequences") for line in lines)
