"""The simulated vLLM's engine, in process (lab/sim/vllm/src/vllm/sim/model.py, protocol.py,
engine.py, metrics.py): where a reply ends (max_tokens, ignore_eos, min_tokens, stop), its
logprobs, the request checks, the slots taken first come first served, the /metrics text."""

import math
import sys
import threading
import time

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.vllm_sim import SRC, make_model

sys.path.insert(0, SRC)

from vllm.sim import args as args_mod, config as config_mod, engine as engine_mod  # noqa: E402  pylint: disable=wrong-import-position
from vllm.sim import metrics, model, protocol  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(name="config")
def fixture_config(tmp_path):
    args = args_mod.parse_vllm(["serve", make_model(tmp_path), "--served-model-name", "glm", "--max-model-len",
                                "4096", "--reasoning-parser", "glm45", "--max-num-seqs", "2"])[0]
    return config_mod.resolve(args, "serve")


# --- where a reply ends ----------------------------------------------------------------------

def natural(key, thinking=False):
    return len(model.Plan(key, thinking, 10000).tokens)


@pytest.mark.parametrize("key", [0, 7, 12345, 987654321])
def test_eos_max_tokens_ignore_eos_and_min_tokens(key):
    planned = natural(key)
    plan = model.Plan(key, False, 10000)
    assert plan.finish == "stop" and all(kind == "content" for kind, text in plan.tokens)
    assert (len(model.Plan(key, False, planned).tokens), model.Plan(key, False, planned).finish) == (planned, "length")
    assert model.Plan(key, False, planned - 1).finish == "length"
    # ignore_eos: the reply runs to max_tokens, whatever the model planned.
    longer = model.Plan(key, False, planned + 50, ignore_eos=True)
    assert (len(longer.tokens), longer.finish) == (planned + 50, "length")
    # min_tokens: EOS cannot come sooner; the reply still stops (not length) below max_tokens.
    held = model.Plan(key, False, planned + 50, min_tokens=planned + 20)
    assert (len(held.tokens), held.finish) == (planned + 20, "stop")
    assert model.Plan(key, False, planned + 50, min_tokens=planned - 2).finish == "stop"
    assert len(model.Plan(key, False, planned + 50, min_tokens=planned - 2).tokens) == planned
    assert model.Plan(key, False, planned + 20, min_tokens=planned + 20).finish == "length"


def test_thinking_writes_reasoning_then_the_end_of_it_then_the_answer():
    plan = model.Plan(42, True, 10000)
    kinds = [kind for kind, text in plan.tokens]
    cut = kinds.index("think_end")
    assert cut >= 12 and set(kinds[:cut]) == {"reasoning"} and set(kinds[cut + 1:]) == {"content"}
    assert plan.tokens[cut][1] == "</think>"
    assert natural(42, thinking=True) > natural(42)


def test_logprobs_put_the_sampled_token_first_and_sum_below_one():
    plan = model.Plan(99, False, 100)
    for position in range(len(plan.tokens)):
        top = plan.top(position, 5)
        assert top[0] == (plan.tokens[position][1], plan.logprob(position))
        values = [value for text, value in top]
        assert values == sorted(values, reverse=True) and values[0] < 0
        assert sum(math.exp(value) for value in values) < 1
    assert plan.top(0, 0) == []


def test_replies_depend_on_prompt_seed_and_choice():
    prompt = model.tokenize("What is 12*13?")
    assert len(prompt) == 6  # What is 12 * 13 ?
    same = model.seed_key(prompt, None, 0, 0.0)
    assert same == model.seed_key(prompt, None, 0, 0.0) != model.seed_key(prompt, None, 1, 0.0)
    assert model.seed_key(prompt, 5, 0, 0.8) == model.seed_key(prompt, 5, 0, 0.8)
    assert len({model.seed_key(prompt, None, 0, 0.8) for attempt in range(5)}) > 1  # sampled, no seed
    thinking = model.chat_prompt([{"role": "user", "content": "hi"}], True)
    assert len(model.chat_prompt([{"role": "user", "content": "hi"}], False)) == len(thinking) + 1
    with pytest.raises(model.PromptError):
        model.chat_prompt([{"role": "robot", "content": "hi"}], True)


# --- request checks -------------------------------------------------------------------------------

@pytest.mark.parametrize("body, status, message, param", [
    ({"model": "gpt-4", "messages": []}, 404, "The model `gpt-4` does not exist.", "model"),
    ({"messages": []}, 400, "messages must be a non-empty list", "messages"),
    ({"messages": [{"role": "user", "content": "x"}], "n": 0}, 400, "n must be at least 1, got 0.", "n"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 400, "max_tokens must be at least 1, got 0.",
     "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "min_tokens": 6}, 400,
     "min_tokens must be less than or equal to max_tokens=5, got 6.", "min_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "ignore_eos": "yes"}, 400, "ignore_eos must be true or false",
     "ignore_eos"),
    ({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, 400,
     "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs"),
    ({"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21}, 400,
     "Requested sample logprobs of 21, which is greater than max allowed: 20", "logprobs"),
    ({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": True}}, 400,
     "Stream options can only be defined when `stream=True`.", "stream_options"),
    ({"messages": [{"role": "user", "content": "x"}], "temperature": -1}, 400, "temperature must be non-negative",
     "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 4092}, 400, "'max_tokens' or "
     "'max_completion_tokens' is too large: 4092. This model's maximum context length is 4096 tokens and your "
     "request has 5 input tokens (4092 > 4096 - 5).", "max_tokens"),
    ({"messages": [{"role": "user", "content": "x " * 5000}]}, 400, "This model's maximum context length is 4096 "
     "tokens. However, your request has 5004 input tokens.", "messages"),
])
def test_bad_requests_get_vllms_errors(config, body, status, message, param):
    with pytest.raises(protocol.ApiError) as caught:
        protocol.parse(body, "chat", config).budgets()
    error = caught.value.body()["error"]
    assert (caught.value.status, error["code"], error["param"]) == (status, status, param)
    assert error["type"] == ("NotFoundError" if status == 404 else "BadRequestError")
    assert error["message"].startswith(message)


def test_a_good_request_and_what_it_defaults_to(config, capsys):
    request = protocol.parse({"model": "glm", "messages": [{"role": "user", "content": "hi"}], "logprobs": True,
                              "top_logprobs": 3, "n": 2, "stop": "kalo", "frobnicate": 1}, "chat", config)
    assert (request.n, request.logprobs, request.stop, request.thinking, request.parsed) == (2, 3, ["kalo"], True, True)
    assert request.budgets() == [4096 - len(request.prompts[0])]  # no max_tokens: what the context leaves
    assert "fields were present in the request but ignored: {'frobnicate'}" in capsys.readouterr().out
    off = protocol.parse({"messages": [{"role": "user", "content": "hi"}],
                          "chat_template_kwargs": {"enable_thinking": False}}, "chat", config)
    assert off.thinking is False
    text = protocol.parse({"prompt": ["one two", "three"], "logprobs": 0}, "text", config)
    assert ([len(ids) for ids in text.prompts], text.logprobs, text.thinking) == ([2, 1], 0, False)


# --- slots --------------------------------------------------------------------------------------

def test_sequences_wait_for_a_slot_first_come_first_served(config):
    engine = engine_mod.Engine(config, kv_tokens=100000)  # --max-num-seqs 2
    seqs = [engine_mod.Sequence([1, 2, 3], model.Plan(index, False, 5), index) for index in range(4)]

    def never():
        return False

    assert engine.acquire(seqs[0], never) and engine.acquire(seqs[1], never)
    order = []

    def wait(seq):
        engine.acquire(seq, never)
        order.append(seq.index)

    third = threading.Thread(target=wait, args=(seqs[2],))
    third.start()
    while engine.stats.waiting < 1:
        pass
    fourth = threading.Thread(target=wait, args=(seqs[3],))
    fourth.start()
    while engine.stats.waiting < 2:
        pass
    assert (engine.stats.running, engine.stats.waiting) == (2, 2)
    engine.release(seqs[1])
    third.join(5)
    assert order == [2] and (engine.stats.running, engine.stats.waiting) == (2, 1)
    engine.release(seqs[0])
    fourth.join(5)
    assert order == [2, 3]
    gone = engine_mod.Sequence([1], model.Plan(9, False, 5), 9)
    assert engine.acquire(gone, lambda: True) is False  # a client that left while waiting
    assert engine.stats.waiting == 0


def test_a_sequence_runs_counts_and_ends_at_a_stop_string(config):
    engine = engine_mod.Engine(config, kv_tokens=1000)
    engine.step = 0.0
    plan = model.Plan(3, False, 40, ignore_eos=True)
    target = plan.tokens[5][1].strip()
    seq = engine_mod.Sequence([1] * 10, plan, 0, stop=[target])
    out = []
    engine.run(seq, lambda kind, text, position: out.append(text), lambda: False)
    assert (seq.finish, seq.stop_reason) == ("stop", target)
    assert target not in "".join(out) and seq.generated == 6
    free = engine_mod.Sequence([1] * 10, model.Plan(3, False, 40, ignore_eos=True), 1)
    engine.run(free, lambda kind, text, position: None, lambda: False)
    stats = engine.stats
    assert (free.finish, free.generated, stats.prompt_tokens, stats.generation_tokens) == ("length", 40, 20, 46)
    assert (stats.running, stats.kv_used, stats.success["stop"], stats.success["length"]) == (0, 0, 1, 1)


def test_the_stats_line_while_busy_and_once_when_idle(config, capsys):
    engine = engine_mod.Engine(config, kv_tokens=1000)
    stop = threading.Event()
    logger = threading.Thread(target=engine.log_stats, args=(0.05, stop))
    logger.start()
    with engine.cond:
        engine.stats.prompt_tokens, engine.stats.running = 100, 1
    deadline = time.monotonic() + 5
    while "Running: 1 reqs" not in capsys.readouterr().out:  # readouterr empties: each check sees new lines
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with engine.cond:
        engine.stats.running = 0
    time.sleep(0.4)  # idle: one more line, then silence
    stop.set()
    logger.join(5)
    lines = [line for line in capsys.readouterr().out.splitlines() if "Engine 000:" in line]
    idle = [line for line in lines if "Running: 0 reqs, Waiting: 0 reqs" in line]
    assert idle == lines[-1:]  # one line when it went idle, none after
    assert lines[0].startswith("(APIServer pid=") and "Avg prompt throughput:" in lines[0]


def test_metrics_text_has_vllms_series(config):
    stats = metrics.Stats(1000)
    stats.running, stats.kv_used, stats.prompt_tokens = 1, 250, 12
    stats.ttft.observe(0.03)
    text = stats.render('glm "x"')
    labels = 'engine="0",model_name="glm \\"x\\""'
    assert "# TYPE vllm:prompt_tokens_total counter" in text
    assert "vllm:prompt_tokens_total{%s} 12.0" % labels in text
    assert "vllm:num_requests_running{%s} 1.0" % labels in text
    assert "vllm:kv_cache_usage_perc{%s} 0.25" % labels in text
    assert 'vllm:time_to_first_token_seconds_bucket{%s,le="0.02"} 0.0' % labels in text
    assert 'vllm:time_to_first_token_seconds_bucket{%s,le="0.04"} 1.0' % labels in text
    assert 'vllm:time_to_first_token_seconds_bucket{%s,le="+Inf"} 1.0' % labels in text
    assert 'vllm:request_success_total{%s,finished_reason="stop"} 0.0' % labels in text
    assert "gpu_cache_usage_perc" not in text  # gone from current vLLM
