"""Rank 0's OpenAI-compatible API of the simulated vLLM (lab/sim/vllm/src/vllm/sim/api.py),
against one single-node server for the module (the API is the same whatever the number
of nodes behind it): routes, vLLM's error bodies, chat and text completions streamed or
not, reasoning split by the parser, logprobs, n, the end of a reply, usage, /metrics and
--max-num-seqs (2 here) with the others waiting first come first served."""

import http.client
import json
import threading
import time

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.fake_gpu_driver import GIB, FakeDriver, figures
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.ports import Reserved
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.vllm_sim import (
    NAME, Proc, make_model, metric_values, request, sim_env, stream, wait_healthy)

CHAT = {"model": NAME, "messages": [{"role": "user", "content": "What is 12*13? Answer briefly."}], "max_tokens": 200,
        "temperature": 0}
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture(name="server", scope="module")
def fixture_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm-api")
    with FakeDriver(figures(3.6 * GIB)) as driver, Reserved() as held:
        args = [make_model(tmp), "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(held.port),
                "--gpu-memory-utilization", "0.82", "--max-model-len", "8192", "--max-num-seqs", "2",
                "--reasoning-parser", "glm45", "--default-chat-template-kwargs", '{"enable_thinking":true}']
        proc = Proc(args, sim_env(driver, VLLM_SIM_TOKEN_SECONDS="0.002"), tmp, "api")
        url = "http://127.0.0.1:%d" % held.port
        try:
            wait_healthy(url, proc)
            yield url, proc
        finally:
            proc.stop()


def test_routes(server):
    url = server[0]
    assert request(url, "/health") == (200, "")
    assert request(url, "/version") == (200, {"version": "0.1.dev20051+g487ecf187.sim"})
    assert request(url, "/nothing") == (404, {"detail": "Not Found"})
    assert request(url, "/health", {}) == (405, {"detail": "Method Not Allowed"})
    status, body = request(url, "/v1/models")
    model = body["data"][0]
    assert (status, body["object"], model["id"], model["object"], model["owned_by"]) == (200, "list", NAME, "model",
                                                                                         "vllm")
    assert model["max_model_len"] == 8192 and model["root"].endswith("/model")


def test_a_model_it_does_not_serve_is_vllms_404(server):
    status, body = request(server[0], "/v1/chat/completions", dict(CHAT, model="glm-4"))
    assert status == 404
    assert body == {"error": {"message": "The model `glm-4` does not exist.", "type": "NotFoundError", "param": "model",
                              "code": 404}}
    status, body = request(server[0], "/v1/completions", {"prompt": "x", "max_tokens": 9000})
    assert status == 400 and body["error"]["type"] == "BadRequestError" and "is too large: 9000" in (
        body["error"]["message"])


def test_chat_splits_reasoning_and_counts_every_token(server):
    status, body = request(server[0], "/v1/chat/completions", CHAT)
    assert status == 200 and body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    choice = body["choices"][0]
    message = choice["message"]
    assert message["role"] == "assistant" and message["reasoning_content"] and message["content"]
    assert message["reasoning"] == message["reasoning_content"] and "</think>" not in message["content"]
    usage = body["usage"]
    words = len(message["reasoning_content"].split()) + len(message["content"].split())
    assert usage["completion_tokens"] == words + 1  # the reasoning, </think> and the answer
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert (choice["finish_reason"], choice["stop_reason"], choice["logprobs"]) == ("stop", None, None)
    off = request(server[0], "/v1/chat/completions", dict(CHAT, **NO_THINKING))[1]["choices"][0]["message"]
    assert off["reasoning_content"] is None and off["content"]


def test_where_a_reply_ends(server):
    url = server[0]

    def reply(**extra):
        body = request(url, "/v1/chat/completions", dict(CHAT, **dict(NO_THINKING, **extra)))[1]
        return body["usage"]["completion_tokens"], body["choices"][0]["finish_reason"]

    planned, finish = reply()
    assert finish == "stop"
    assert reply(max_tokens=planned - 1) == (planned - 1, "length")
    assert reply(max_tokens=150, ignore_eos=True) == (150, "length")
    assert reply(max_tokens=150, min_tokens=planned + 40) == (planned + 40, "stop")
    assert reply(max_tokens=150, min_tokens=2) == (planned, "stop")
    status, body = request(url, "/v1/chat/completions", dict(CHAT, max_tokens=5, min_tokens=6))
    assert status == 400 and body["error"]["param"] == "min_tokens"


def test_streamed_chat_is_the_same_reply_in_chunks(server):
    url = server[0]
    whole = request(url, "/v1/chat/completions", CHAT)[1]
    events = stream(url, "/v1/chat/completions", dict(CHAT, stream_options={"include_usage": True}))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(chunk["object"] == "chat.completion.chunk" and chunk["id"] == chunks[0]["id"] for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks[1:-2]]
    assert "".join(delta.get("content", "") for delta in deltas) == whole["choices"][0]["message"]["content"]
    assert "".join(delta.get("reasoning_content", "") for delta in deltas) == (
        whole["choices"][0]["message"]["reasoning_content"])
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]


def test_chat_logprobs_cover_every_token(server):
    body = request(server[0], "/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=3))[1]
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == body["usage"]["completion_tokens"]
    for entry in content:
        assert entry["logprob"] <= 0 and entry["bytes"] == list(entry["token"].encode())
        assert len(entry["top_logprobs"]) == 3 and entry["top_logprobs"][0]["token"] == entry["token"]
    events = stream(server[0], "/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=1))
    streamed = [chunk["choices"][0]["logprobs"] for chunk in events[1:-2] if chunk["choices"][0]["logprobs"]]
    assert all(len(item["content"]) == 1 for item in streamed) and streamed


def test_text_completions_with_logprobs_and_n(server):
    url = server[0]
    status, body = request(url, "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 12,
                                                    "ignore_eos": True, "logprobs": 2, "n": 3, "seed": 7})
    assert status == 200 and body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert [choice["index"] for choice in body["choices"]] == [0, 1, 2]
    assert len({choice["text"] for choice in body["choices"]}) == 3  # each choice its own reply
    assert body["usage"] == {"prompt_tokens": 5, "total_tokens": 41, "completion_tokens": 36,
                             "prompt_tokens_details": None}
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == 12 and "".join(logprobs["tokens"]) == body["choices"][0]["text"]
    assert logprobs["text_offset"][:2] == [0, len(logprobs["tokens"][0])]
    assert all(len(top) == 2 for top in logprobs["top_logprobs"])
    events = stream(url, "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 12, "n": 2,
                                             "ignore_eos": True, "seed": 7})
    texts = {}
    for chunk in events[:-1]:
        choice = chunk["choices"][0]
        texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
    assert texts == {0: body["choices"][0]["text"], 1: body["choices"][1]["text"]}  # same seed, same replies


def test_metrics_count_what_was_served(server):
    url = server[0]
    before = metric_values(request(url, "/metrics")[1])
    labels = '{engine="0",model_name="%s"}' % NAME
    request(url, "/v1/completions", {"prompt": "one two three", "max_tokens": 10, "ignore_eos": True})
    after = metric_values(request(url, "/metrics")[1])
    assert after["vllm:prompt_tokens_total" + labels] - before["vllm:prompt_tokens_total" + labels] == 3
    assert after["vllm:generation_tokens_total" + labels] - before["vllm:generation_tokens_total" + labels] == 10
    success = 'vllm:request_success_total{engine="0",model_name="%s",finished_reason="length"}' % NAME
    assert after[success] - before.get(success, 0) == 1
    assert after["vllm:time_to_first_token_seconds_count" + labels] == before.get(
        "vllm:time_to_first_token_seconds_count" + labels, 0) + 1
    assert after["vllm:e2e_request_latency_seconds_count" + labels] >= 1
    assert after["vllm:num_requests_running" + labels] == 0 and after["vllm:kv_cache_usage_perc" + labels] == 0


def first_token_and_end(url, body):
    """(when the first content token arrived, when [DONE] did) of a streamed chat, read as it comes."""
    conn = http.client.HTTPConnection(url.split("//")[1], timeout=30)
    conn.request("POST", "/v1/chat/completions", json.dumps(dict(body, stream=True)),
                 {"Content-Type": "application/json"})
    first = None
    for line in conn.getresponse():
        if line.startswith(b"data: [DONE]"):
            break
        if first is None and line.startswith(b"data: ") and b'"content": "' in line and b'"role"' not in line:
            first = time.monotonic()
    conn.close()
    return first, time.monotonic()


def test_max_num_seqs_run_at_once_and_the_rest_wait_in_order(server):
    url = server[0]
    long_chat = dict(CHAT, max_tokens=500, ignore_eos=True, **NO_THINKING)  # at least 1 s each at 2 ms a token
    times = {}

    def run(name):
        times[name] = first_token_and_end(url, long_chat)

    def gauge(name):
        return metric_values(request(url, "/metrics")[1])['vllm:%s{engine="0",model_name="%s"}' % (name, NAME)]

    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while gauge("num_requests_running") < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    threads.append(threading.Thread(target=run, args=("c",)))
    threads[-1].start()
    while gauge("num_requests_waiting") < 1:  # --max-num-seqs 2: the third waits
        assert time.monotonic() < deadline and "c" not in times
        time.sleep(0.01)
    assert gauge("num_requests_running") == 2
    for thread in threads:
        thread.join(30)
    first_end = min(times["a"][1], times["b"][1])
    assert times["c"][0] >= first_end - 0.05  # its first token only once a slot was free
    assert times["c"][0] - min(times["a"][0], times["b"][0]) > 0.9
    assert gauge("num_requests_waiting") == 0 and gauge("num_requests_running") == 0


def test_the_access_log_and_a_client_that_leaves(server):
    url, proc = server
    request(url, "/v1/models")
    proc.wait_for(r'^\(APIServer pid=\d+\) INFO:     127\.0\.0\.1:\d+ - "GET /v1/models HTTP/1\.1" 200 OK$')
    # A client that gives up on a long reply frees its slot (finish "abort").
    labels = '{engine="0",model_name="%s"}' % NAME
    aborted = 'vllm:request_success_total{engine="0",model_name="%s",finished_reason="abort"}' % NAME
    before = metric_values(request(url, "/metrics")[1]).get(aborted, 0)
    with pytest.raises(OSError):
        request(url, "/v1/chat/completions", dict(CHAT, max_tokens=3000, ignore_eos=True), timeout=0.3)
    deadline = time.monotonic() + 10
    while metric_values(request(url, "/metrics")[1]).get(aborted, 0) == before:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert metric_values(request(url, "/metrics")[1])["vllm:num_requests_running" + labels] == 0


def test_an_api_key_guards_the_v1_routes(tmp_path):
    with FakeDriver(figures(3.6 * GIB)) as driver, Reserved() as held:
        args = [make_model(tmp_path), "--port", str(held.port), "--host", "127.0.0.1", "--gpu-memory-utilization",
                "0.82", "--api-key", "s3cret"]
        proc = Proc(args, sim_env(driver), tmp_path, "key")
        url = "http://127.0.0.1:%d" % held.port
        try:
            wait_healthy(url, proc)  # /health needs no key
            assert request(url, "/v1/models") == (401, {"error": "Unauthorized"})
            assert request(url, "/v1/models", headers={"Authorization": "Bearer s3cret"})[0] == 200
        finally:
            proc.stop()
