"""Busy or wedged: /health in flight and /metrics progress counters."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _engine_activity as ea

METRICS = """# HELP tensorfold_completion_tokens_total Completion tokens.
# TYPE tensorfold_completion_tokens_total counter
tensorfold_completion_tokens_total{model="glm-5.3-flash"} 1200
tensorfold_decode_rounds_total{model="glm-5.3-flash"} 480
tensorfold_requests_inflight{model="glm-5.3-flash"} 8
tensorfold_uptime_seconds{model="glm-5.3-flash"} 3600
"""
VLLM = """vllm:generation_tokens_total{model_name="glm"} 5.0e+03
vllm:num_requests_running{model_name="glm"} 8.0
vllm:request_success_total{finished_reason="stop",model_name="glm"} 12.0
vllm:request_success_total{finished_reason="length",model_name="glm"} 3.0
"""


@pytest.mark.parametrize("body, expected", [
    ({"ok": True, "inflight": 8}, 8),
    ({"ok": True, "inflight": 0}, 0),
    ({"ok": True, "streams": {"decoding": 5, "prefilling": 3, "max": 8}}, 8),
    ({"ok": True, "inflight": True}, None),
    ({"ok": True}, None),
    ("not json", None),
    (None, None),
])
def test_in_flight(body, expected):
    assert ea.in_flight(body) == expected


def test_progress_sums_only_counters_of_the_mode():
    assert ea.progress_total(METRICS, "tensorfold") == 1680  # gauges are not progress
    assert ea.progress_total(VLLM, "vllm") == 5015
    assert ea.progress_total("# nothing here\n", "tensorfold") is None
    assert ea.progress_total(None, "vllm") is None


def test_busy_needs_requests_in_flight_and_counters_that_grew():
    health = {"ok": True, "inflight": 8}
    assert ea.busy_verdict(health, 1680, 1900) == {"busy": True, "reason": None}
    wedged = ea.busy_verdict(health, 1680, 1680)
    assert not wedged["busy"] and "looks wedged" in wedged["reason"]
    idle = ea.busy_verdict({"ok": True, "inflight": 0}, 1, 2)
    assert not idle["busy"] and "no request in flight" in idle["reason"]
    blind = ea.busy_verdict(health, None, 5)
    assert not blind["busy"] and "no progress counter" in blind["reason"]
