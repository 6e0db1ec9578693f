"""_readiness on the log lines, /health bodies and docker answers the references quote.

Sources (quoted verbatim where the reference gives a real line; where it gives a line with
placeholders such as N or K, the numbers are filled in and the rest is kept):
  kit §2.6   healthy rank-0 log lines (AGENTS §4)
  kit §4.2   the real W18 /health sample; the fields patch 0600 adds (streams.max)
  kit §4.6   the 0490 boot line, the batching line and the shortfall line
  kit §6.1   "GLM53_TF_BATCH=4: only 3 sequence(s) fit"
  seed §1.2  "/health can answer HTTP 200 with {"ok": false} after a rank dies"
"""

import json

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _readiness as rd

# kit §2.6, in boot order, with the 0490 line's N and K filled in (K = 4, the kit's production batch).
HEALTHY_4 = """\
[boot] r0 +17.6s weights: 82.2 GB on the GPU ...
[tensorfold] roce: all-gathers of up to 256 KiB a rank over RoCE on roceP2p1s0f1 (...), rocep1s0f1 (...)
[tensorfold] latent KV cache (fp8 rows): 7.4 KB a token a rank ...
[tensorfold] batching 4 requests: 3 extra sequence(s), ...
[tensorfold] KV pool (patches/0290): 1048576 tokens in 4096 pages of 256, 7.44 GiB on this rank, shared by the 4 slots ...
[tensorfold] session store: 2.0 GiB ...
[tensorfold] context: 1048576 tokens a request (max_model_len; ...); KV cache: ...; 4 request slot(s); KV pool: ...
[tensorfold] serving GLM-5.3-Flash-EXL3 at http://127.0.0.1:8000/v1 on CUDA, rank 0 of 2 (...; loaded in ...s)
[canary] ok: 3 probes, tokens/round 5.71, decode 76.7 tok/s
"""
HEALTHY_8 = (HEALTHY_4.replace("batching 4 requests: 3 extra", "batching 8 requests: 7 extra")
             .replace("shared by the 4 slots", "shared by the 8 slots")
             .replace("; 4 request slot(s);", "; 8 request slot(s);"))
# The same start when page cache left room for one sequence only (kit §4.6 shortfall line, N=8, K=1).
SHORTFALL_LINE = ("[tensorfold] GLM53_TF_BATCH=8: only 1 sequence(s) fit with GLM53_TF_BATCH_RESERVE_GB=11 kept free "
                  "(... GB a sequence ...) and the session store's 2.0 GiB; serving that many")
ONE_SLOT = """\
[boot] r0 +17.6s weights: 82.2 GB on the GPU ...
%s
[tensorfold] session store: 2.0 GiB ...
[tensorfold] context: 1048576 tokens a request (max_model_len; ...); KV cache: ...; 1 request slot(s); KV pool: ...
[tensorfold] serving GLM-5.3-Flash-EXL3 at http://127.0.0.1:8000/v1 on CUDA, rank 0 of 2 (...; loaded in ...s)
""" % SHORTFALL_LINE
# Before patch 0490 there is no "request slot(s)" line; tf-prod.sh's slots() reads the batching line.
PRE_0490 = "\n".join(line for line in HEALTHY_8.splitlines() if "request slot(s)" not in line)

# kit §4.2: the real W18 sample (image b9, before patch 0600: no streams).
W18_HEALTH = ('{"ok": true, "mode": "basic", "uptime_s": 2860.0, "inflight": 0, "oldest_s": 0.0, "idle_s": 0.0, '
              '"requests": 654, "errors": 0}')


def health_0600(slots_max, ok=True):
    """A W19+ body: the W18 fields plus what patch 0600 adds (kit §4.2), streams.max = slots that fit."""
    body = json.loads(W18_HEALTH)
    body.update(ok=ok, backend="tensorfold", busy=False, requests_running=0, requests_total=654,
                prompt_tokens_total=8123456, completion_tokens_total=912345, prefill_seconds_total=812.5,
                decode_seconds_total=9876.5, cached_tokens_total=6543210, rounds_total=171234,
                drafted_total=812345, accepted_total=741234,
                streams={"decoding": 0, "prefilling": 0, "max": slots_max}, context_length=1048576)
    return json.dumps(body)


def answer(status=200, body=None, error=None, path="/health"):
    return {"url": "http://127.0.0.1:8000" + path, "status": status, "body": body, "error": error,
            "timed_out": False}


MODELS = {"object": "list", "data": [{"id": "GLM-5.3-Flash-EXL3", "object": "model", "owned_by": "tensorfold",
                                      "created": 1760000000, "root": "GLM-5.3-Flash-EXL3",
                                      "max_model_len": 1048576, "context_length": 1048576}]}


def running(rank=0, node="spark-head", container="glm53-tf-r0"):
    return {"rank": rank, "node": node, "container": container, "state": "running", "exit_code": 0,
            "oom_killed": False, "error": None, "log_tail": None}


# --- rank-0 log ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, slots", [
    (HEALTHY_8, 8),
    (HEALTHY_4, 4),
    (ONE_SLOT, 1),
    (PRE_0490, 8),
    # A log with both: the 0490 boot line is the engine's own count and wins over the batching line.
    (HEALTHY_8.replace("; 8 request slot(s);", "; 3 request slot(s);"), 3),
    # Last match: rank 0's log after the kit restarted the engine in the same container.
    (ONE_SLOT + HEALTHY_8, 8),
    (HEALTHY_8 + ONE_SLOT, 1),
    ("[boot] r0 +17.6s weights: 82.2 GB on the GPU ...\n", None),
    ("", None),
    (None, None),
])
def test_log_slots(text, slots):
    assert rd.log_slots(text) == slots


def test_log_slots_does_not_read_other_numbers_as_slots():
    # "1048576 tokens a request", "shared by the 4 slots" and "3 extra sequence(s)" are not slot counts.
    only_other_lines = "\n".join(line for line in HEALTHY_4.splitlines()
                                 if "request slot(s)" not in line and "batching" not in line)
    assert rd.log_slots(only_other_lines) is None


def test_log_shortfall_reads_the_engines_line():
    found = rd.log_shortfall(ONE_SLOT)
    assert found == {"requested": 8, "fit": 1, "line": SHORTFALL_LINE[len("[tensorfold] "):]}
    # kit §6.1 as the table quotes it.
    assert rd.log_shortfall("GLM53_TF_BATCH=4: only 3 sequence(s) fit") == {
        "requested": 4, "fit": 3, "line": "GLM53_TF_BATCH=4: only 3 sequence(s) fit"}
    assert rd.log_shortfall(HEALTHY_8) is None


# --- /health ------------------------------------------------------------------------------------

def test_w18_health_sample_is_ok_and_has_no_slot_count():
    body = rd.parse_body(W18_HEALTH)
    assert rd.health_verdict(200, body, slots=8) == {"ok": True, "reason": None, "streams_max": None}


def test_0600_health_with_enough_streams_is_ok():
    assert rd.health_verdict(200, rd.parse_body(health_0600(8)), slots=8) == {
        "ok": True, "reason": None, "streams_max": 8}


def test_0600_health_with_one_stream_names_the_count_and_the_eviction():
    verdict = rd.health_verdict(200, rd.parse_body(health_0600(1)), slots=8)
    assert verdict["ok"] is False and verdict["streams_max"] == 1
    assert verdict["reason"].startswith("/health streams.max reports 1 request slot(s), want 8: page cache counts "
                                        "as used at load on GB10, evict it before starting"), verdict
    assert "page_cache_evict" in verdict["reason"]


def test_200_with_ok_false_is_not_healthy():
    # seed §1.2: /health answers 200 with {"ok": false} after a rank dies.
    verdict = rd.health_verdict(200, rd.parse_body('{"ok": false}'), slots=8)
    assert verdict["ok"] is False
    assert verdict["reason"].startswith("/health answered 200 with ok: false"), verdict


def test_ok_false_names_the_fatal_error_and_stalls():
    body = json.loads(W18_HEALTH)
    body.update(ok=False, fatal="RuntimeError: CUDA error: an illegal memory access was encountered",
                stalled=[{"prompt": 314000, "quiet_s": 900.0, "allowed_s": 600.0}])
    verdict = rd.health_verdict(200, body)
    assert verdict["reason"] == (
        "/health answered 200 with ok: false (fatal: RuntimeError: CUDA error: an illegal memory access was "
        "encountered; 1 stalled request(s)); a fatal engine error never clears, restart the ranks")
    # strict mode: 503 with the same body.
    assert rd.health_verdict(503, body)["reason"].startswith("/health answered HTTP 503 (fatal: RuntimeError")


@pytest.mark.parametrize("body, shown", [
    ('{"ok": "true"}', 'ok: "true"'),  # a string is not the JSON true
    ("{}", "ok: null"),
])
def test_only_the_json_true_counts(body, shown):
    verdict = rd.health_verdict(200, rd.parse_body(body))
    assert verdict["ok"] is False and shown in verdict["reason"], verdict


def test_health_that_is_not_json():
    verdict = rd.health_verdict(200, rd.parse_body("<html>502 Bad Gateway</html>"))
    assert verdict["ok"] is False and "not with a JSON object" in verdict["reason"]
    assert rd.parse_body("") is None and rd.parse_body("  \n") is None


def test_streams_max_ignores_what_is_not_a_count():
    assert rd.streams_max({"streams": {"max": True}}) is None
    assert rd.streams_max({"streams": {"max": "8"}}) is None
    assert rd.streams_max({"streams": None}) is None
    assert rd.streams_max("ok") is None


def test_model_ids():
    assert rd.model_ids(MODELS) == ["GLM-5.3-Flash-EXL3"]
    assert rd.model_ids({"object": "list", "data": []}) == []
    assert rd.model_ids({"error": "not found"}) is None


# --- ranks --------------------------------------------------------------------------------------

def state_json(**fields):
    """``docker inspect --format '{{json .State}}'`` output, with Docker's field names."""
    state = {"Status": "running", "Running": True, "Paused": False, "Restarting": False, "OOMKilled": False,
             "Dead": False, "Pid": 4242, "ExitCode": 0, "Error": "", "StartedAt": "2026-10-03T09:12:01.5Z",
             "FinishedAt": "0001-01-01T00:00:00Z"}
    state.update(fields)
    return json.dumps(state) + "\n"


@pytest.mark.parametrize("run, via_ssh, expected", [
    ((0, state_json(), ""), False, ("running", 0, False)),
    ((0, state_json(Status="exited", Running=False, Pid=0, ExitCode=1), ""), True, ("exited", 1, False)),
    ((0, state_json(Status="exited", Running=False, Pid=0, ExitCode=137, OOMKilled=True), ""), True,
     ("oom", 137, True)),
    # killed by docker kill / a signal, not by the OOM killer
    ((0, state_json(Status="exited", Running=False, Pid=0, ExitCode=137), ""), False, ("exited", 137, False)),
    ((0, state_json(Status="dead", Running=False, Dead=True, ExitCode=255), ""), False, ("exited", 255, False)),
    ((0, state_json(Status="created", Running=False, Pid=0), ""), False, ("created", 0, False)),
    ((1, "\n", "Error: No such container: glm53-tf-r1\n"), True, ("absent", None, None)),
    ((1, "\n", "Error response from daemon: No such container: glm53-tf-r0\n"), False, ("absent", None, None)),
    ((255, "", "ssh: connect to host spark-worker port 22: Connection refused\r\n"), True,
     ("unreachable", None, None)),
    # docker itself fails (daemon down): the check cannot tell, it is not the container's fault
    ((1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"),
     False, ("unknown", None, None)),
    # rc 255 from the local docker is not an ssh failure
    ((255, "", "some docker failure\n"), False, ("unknown", None, None)),
    ((0, "Template parsing error\n", ""), False, ("unknown", None, None)),
])
def test_rank_state(run, via_ssh, expected):
    rc, stdout, stderr = run
    judged = rd.rank_state(rc, stdout, stderr, via_ssh=via_ssh)
    assert (judged["state"], judged["exit_code"], judged["oom_killed"]) == expected, judged
    assert (judged["error"] is None) == (expected[0] in ("running", "exited", "oom", "created")), judged


def test_rank_state_of_a_command_that_timed_out():
    judged = rd.rank_state(-15, "", "", error="`ssh ...` did not finish within 15s; its process group was killed",
                           via_ssh=True)
    assert judged["state"] == "unknown" and "did not finish within 15s" in judged["error"]


def test_exited_rank_fails_at_once_with_its_last_lines():
    rank = dict(running(1, "spark-worker", "glm53-tf-r1"), state="exited", exit_code=1,
                log_tail=["[boot] r1 +4.1s container started", "RuntimeError: NCCL error: remote process exited"])
    assert rd.rank_failure(rank) == (
        "rank 1 (glm53-tf-r1 on spark-worker) exited with code 1 (OOMKilled: false): last lines: "
        "[boot] r1 +4.1s container started | RuntimeError: NCCL error: remote process exited")


def test_oom_killed_rank_names_the_memory_fix():
    rank = dict(running(), state="oom", exit_code=137, oom_killed=True, log_tail=[])
    message = rd.rank_failure(rank)
    assert message.startswith("rank 0 (glm53-tf-r0 on spark-head) was OOM-killed (exit code 137, OOMKilled: true): "
                              "not enough free memory at load"), message
    assert message.endswith("last lines: (empty log)")


def test_unreachable_worker_fails_only_after_three_checks_in_a_row():
    rank = dict(running(1, "spark-worker", "glm53-tf-r1"), state="unreachable",
                error="ssh: connect to host spark-worker port 22: Connection refused")
    assert rd.rank_failure(rank, unreachable_in_a_row=2) is None
    assert rd.rank_waiting_reason(rank) == (
        "rank 1 (glm53-tf-r1 on spark-worker) is unreachable over ssh "
        "(ssh: connect to host spark-worker port 22: Connection refused)")
    assert rd.rank_failure(rank, unreachable_in_a_row=3).startswith(
        "rank 1 (glm53-tf-r1 on spark-worker) unreachable over ssh 3 checks in a row")


@pytest.mark.parametrize("state", ["running", "created", "absent", "unknown"])
def test_states_that_wait(state):
    rank = dict(running(), state=state, error="x" if state in ("absent", "unknown") else None)
    assert rd.rank_failure(rank, unreachable_in_a_row=5) is None
    assert (rd.rank_waiting_reason(rank) is None) == (state == "running")


def test_only_a_missing_rank_is_final_once_no_start_is_under_way():
    head, worker = running(), dict(running(1, "spark-worker", "glm53-tf-r1"), state="absent")
    assert rd.absent_rank_reason([head, worker]) == (
        "rank 1 (glm53-tf-r1 on spark-worker) does not exist: "
        "start the ranks first, or name the container that runs them")
    for state in ("running", "created", "unreachable", "unknown"):
        assert rd.absent_rank_reason([head, dict(worker, state=state, error="x")]) is None, state


def test_commands_quote_the_container():
    assert rd.inspect_command("glm53-tf-r1").endswith("}}' glm53-tf-r1")
    assert rd.logs_command("glm53-tf-r0") == "docker logs glm53-tf-r0 2>&1"
    assert rd.logs_command("glm53-tf-r0", tail=40) == "docker logs --tail 40 glm53-tf-r0 2>&1"


# --- tensorfold and vLLM verdicts --------------------------------------------------------------

def tf(log_text=HEALTHY_8, health=W18_HEALTH, models=None, ranks=None, slots=8, served_name=None):
    return rd.tensorfold_verdict(ranks if ranks is not None else [running()],
                                 answer(body=rd.parse_body(health)) if isinstance(health, str) else health,
                                 models or answer(body=MODELS, path="/v1/models"), slots, log_text=log_text,
                                 served_name=served_name)


def test_tensorfold_ready_with_8_slots_in_the_log_and_the_w18_health():
    assert tf() == {"ready": True, "reason": None, "slots": 8, "final": False}


def test_tensorfold_one_slot_names_the_count_the_engines_line_and_the_eviction():
    verdict = tf(log_text=ONE_SLOT)
    assert verdict["ready"] is False and verdict["slots"] == 1
    assert verdict["final"] is True  # serving with a reported short count: slots never grow after load
    assert verdict["reason"] == (
        "rank-0 log reports 1 request slot(s), want 8 (%s): page cache counts as used at load on GB10, evict it "
        "before starting (dgx_spark.glm53.page_cache_evict), stop other workloads, then restart the ranks"
        % SHORTFALL_LINE[len("[tensorfold] "):])


def test_tensorfold_every_source_must_reach_the_slots():
    # the log says 8 but the engine's own streams.max says 4: the smaller one binds
    verdict = tf(health=health_0600(4))
    assert verdict["ready"] is False and verdict["slots"] == 4
    assert verdict["reason"].startswith("/health streams.max reports 4 request slot(s), want 8")
    assert tf(health=health_0600(8)) == {"ready": True, "reason": None, "slots": 8, "final": False}


def test_tensorfold_without_a_container_reads_streams_max():
    assert tf(log_text=None, health=health_0600(8), ranks=[]) == {"ready": True, "reason": None, "slots": 8, "final": False}
    verdict = tf(log_text=None, health=W18_HEALTH, ranks=[])
    assert verdict["ready"] is False and verdict["reason"] == (
        "no slot count, want 8: the rank-0 log is not read (no head container) and /health has no streams.max "
        "(images before patch 0600)")
    # one slot wanted: a single-stream engine prints no count, and needs none
    assert tf(log_text=None, health=W18_HEALTH, ranks=[], slots=1)["ready"] is True


def test_tensorfold_log_without_a_count_yet():
    verdict = tf(log_text="[boot] r0 +2.0s container started\n")
    assert verdict["reason"].startswith("no slot count, want 8: the rank-0 log has no 'K request slot(s)'")


def test_tensorfold_ok_false_with_200_is_not_ready_even_with_8_slots():
    verdict = tf(health='{"ok": false}')
    assert verdict["ready"] is False and verdict["reason"].startswith("/health answered 200 with ok: false")


def test_tensorfold_names_the_first_missing_piece():
    down = answer(status=None, error="ECONNREFUSED (Connection refused)")
    assert tf(health=down)["reason"] == (
        "/health did not answer at http://127.0.0.1:8000/health: ECONNREFUSED (Connection refused)")
    exited_log = [dict(running(), state="absent", error="Error: No such container: glm53-tf-r0")]
    assert tf(ranks=exited_log, health=down)["reason"].startswith("rank 0 (glm53-tf-r0 on spark-head) does not exist")
    no_models = answer(status=404, body={"error": "not found"}, path="/v1/models")
    assert tf(models=no_models)["reason"] == (
        '/v1/models answered HTTP 404 at http://127.0.0.1:8000/v1/models: {"error": "not found"}')
    assert tf(served_name="other")["reason"] == "/v1/models lists GLM-5.3-Flash-EXL3, not the served name other"


def test_vllm_verdict():
    health = answer(body=None)
    models = answer(body={"object": "list", "data": [{"id": "glm-5.3-flash-nvfp4-sm121", "object": "model"}]},
                    path="/v1/models")
    ranks = [running(container="glm53-vllm")]
    assert rd.vllm_verdict(ranks, health, models) == {"ready": True, "reason": None, "slots": None}
    assert rd.vllm_verdict(ranks, health, models, served_name="glm-5.3-flash-nvfp4-sm121")["ready"] is True
    assert rd.vllm_verdict(ranks, health, models, served_name="GLM-5.3-Flash-EXL3")["reason"] == (
        "/v1/models lists glm-5.3-flash-nvfp4-sm121, not the served name GLM-5.3-Flash-EXL3")
    assert rd.vllm_verdict(ranks, answer(status=503, body=None), models)["reason"].startswith(
        "/health answered HTTP 503")


# --- canary -------------------------------------------------------------------------------------

def completion(content="ready", reasoning=None, tokens=2):
    message = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning"] = reasoning
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "GLM-5.3-Flash-EXL3",
            "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 14, "completion_tokens": tokens, "total_tokens": 14 + tokens,
                      "prompt_tokens_details": {"cached_tokens": 0}}}


def test_canary_payload_is_short_and_greedy():
    assert rd.canary_payload("GLM-5.3-Flash-EXL3", 4) == {
        "model": "GLM-5.3-Flash-EXL3", "messages": [{"role": "user", "content": rd.CANARY_PROMPT}],
        "max_tokens": 4, "temperature": 0, "stream": False}


def test_canary_with_content_or_only_reasoning_is_ok():
    assert rd.canary_verdict(answer(body=completion()), 0.4123, 30) == {
        "ok": True, "elapsed": 0.412, "tokens": 2, "text": "ready", "error": None}
    # thinking on: four tokens may all be reasoning
    thinking = rd.canary_verdict(answer(body=completion(content="", reasoning="The user wants")), 0.5, 30)
    assert thinking["ok"] is True and thinking["text"] == "The user wants" and thinking["tokens"] == 2


def test_canary_failures():
    empty = rd.canary_verdict(answer(body=completion(content="", tokens=4)), 0.5, 30)
    assert empty["ok"] is False and empty["error"] == "returned no content and no reasoning (4 completion token(s))"
    hung = rd.canary_verdict(dict(answer(status=None, error="no answer within 30 s"), timed_out=True), 30.0, 30)
    assert hung["error"] == "returned no tokens within 30 s"
    assert rd.canary_failure_message(hung, "tensorfold") == (
        "canary chat completion returned no tokens within 30 s while /health says ok: the ranks look wedged "
        "(silent tensor-parallel hang); restart both ranks")
    assert rd.canary_failure_message(hung, "vllm").startswith(
        "canary chat completion returned no tokens within 30 s while /health answers 200: the ranks look wedged")
    refused = rd.canary_verdict(answer(status=400, body={"error": {"message": "model not found",
                                                                   "type": "invalid_request_error"}}), 0.1, 30)
    assert refused["error"] == "answered HTTP 400: model not found"
    assert rd.canary_failure_message(refused, "tensorfold") == (
        "canary chat completion answered HTTP 400: model not found while /health says ok")


# --- input --------------------------------------------------------------------------------------

def params(**overrides):
    base = {"mode": "tensorfold", "url": "http://127.0.0.1:8000", "slots": 8, "timeout": 600.0, "interval": 1.0,
            "head_container": None, "workers": [], "ssh_options": [], "canary": True, "canary_timeout": 30.0,
            "canary_max_tokens": 4, "served_name": None, "log_lines": 40}
    base.update(overrides)
    return base


def test_validate_accepts_the_defaults_and_an_empty_head_container():
    assert rd.validate(params()) == []
    assert rd.validate(params(head_container="", workers=[{"ssh": "spark@spark-worker", "container": None,
                                                           "node": None}])) == []


@pytest.mark.parametrize("overrides, message", [
    ({"slots": 0}, "slots must be at least 1, got 0"),
    ({"interval": 5.0, "timeout": 2.0}, "interval (5 s) must not exceed timeout (2 s)"),
    ({"timeout": 0.0}, "timeout must be a positive number of seconds, got 0.0"),
    ({"interval": float("nan")}, "interval must be a positive number of seconds, got nan"),
    ({"url": "127.0.0.1:8000"}, "url must be an http:// or https:// base URL"),
    ({"head_container": "-v"}, "head_container must be a Docker container name"),
    ({"workers": [{"ssh": "-oProxyCommand=x", "container": None, "node": None}]}, "workers[0].ssh must be"),
    ({"workers": [{"ssh": "w", "container": "a b", "node": None}]}, "workers[0].container must be a Docker"),
    ({"canary_max_tokens": 0}, "canary_max_tokens must be at least 1"),
    ({"log_lines": 0}, "log_lines must be at least 1"),
    ({"served_name": ""}, "served_name must not be empty"),
])
def test_validate_names_the_option(overrides, message):
    errors = rd.validate(params(**overrides))
    assert any(message in error for error in errors), errors


def test_slot_lines_keep_only_what_the_slot_judgments_read_and_the_last_timestamp():
    text = ("2026-12-01T21:00:00.100000000Z [boot] r0 +2.0s container started\n"
            "2026-12-01T21:00:03.200000000Z [tensorfold] GLM53_TF_BATCH=8: only 1 sequence(s) fit with x\n"
            "2026-12-01T21:00:04.300000000Z [tensorfold] context: 1048576 tokens a request; 1 request slot(s); KV\n"
            "2026-12-01T21:05:00.400000000Z {\"ts\": 1, \"finish\": \"length\"}\n")
    lines, mark = rd.slot_lines(text)
    assert lines == ["[tensorfold] GLM53_TF_BATCH=8: only 1 sequence(s) fit with x",
                     "[tensorfold] context: 1048576 tokens a request; 1 request slot(s); KV"]
    assert mark == "2026-12-01T21:05:00.400000000Z"
    assert rd.log_slots("\n".join(lines)) == 1
    assert rd.slot_lines("") == ([], None)
    assert rd.logs_since_command("glm53-tf-r0", mark) == (
        "docker logs --timestamps --since 2026-12-01T21:05:00.400000000Z glm53-tf-r0 2>&1")
