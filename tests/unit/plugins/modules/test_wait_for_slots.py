"""dgx_spark.glm53.wait_for_slots run as a real module by ``ansible`` (ad hoc, local connection)
against a stand-in engine: a small stdlib HTTP server in this test process that answers
/health, /v1/models and /v1/chat/completions as the kit's TensorFold server or vLLM does
(the engine is the simulated vendor boundary; the bodies are the references' samples).

The controller has no Docker engine of its own, so these runs check no container
(``head_container: ''``, ``workers: []``, for a single-process server); the container-state
judgments are tested on docker's answers in test_readiness.py and end to end on the lab in
tests/integration/test_wait_for_slots.py. Wall times are measured here, around the runs.
"""

import json
import os
import sys
import threading
import time

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.modules import wait_for_slots
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.ports import Reserved
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import OVERDUE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.dirname(sys.executable)
# Run the module with the system Python a target would use, when there is one.
TARGET_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODULE = "dgx_spark.glm53.wait_for_slots"
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
           ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1")
# Keys ansible-core adds to module results (the json callback adds "exception" to a failed one);
# not the module's to document.
ANSIBLE_KEYS = {"_ansible_no_log", "action", "invocation", "changed", "failed", "msg", "exception", "warnings",
                "deprecations"}
# The timeout of the runs that end "not ready after N s: <what was seen last>": long enough for a
# starved machine to get the stand-in's first answer; at 2 s, CI once saw only "/health did not
# answer ... within 1.1 s" (when make test ran the unit tests at nice 10 beside the lab's).
NOT_READY_WAIT = 8
# No container on the controller: the explicit "single-process server" setting.
NO_CONTAINERS = {"head_container": "", "workers": []}

TF_NAME = "GLM-5.3-Flash-EXL3"
VLLM_NAME = "glm-5.3-flash-nvfp4-sm121"
# kit §4.2: the real W18 sample, and the fields patch 0600 adds (streams.max = slots that fit at load).
W18_HEALTH = {"ok": True, "mode": "basic", "uptime_s": 2860.0, "inflight": 0, "oldest_s": 0.0, "idle_s": 0.0,
              "requests": 654, "errors": 0}


def health_0600(slots_max, ok=True):
    return dict(W18_HEALTH, ok=ok, backend="tensorfold", busy=False, requests_running=0, requests_total=654,
                completion_tokens_total=912345, streams={"decoding": 0, "prefilling": 0, "max": slots_max},
                context_length=1048576)


def models_body(name, owner="tensorfold"):
    return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": owner, "created": 1760000000,
                                        "root": name, "max_model_len": 1048576}]}


def completion(name, content="ready", reasoning=None):
    message = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning"] = reasoning
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1760000000, "model": name,
            "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 14, "completion_tokens": 2, "total_tokens": 16}}


class Engine(object):
    """The stand-in engine's behaviour, changed by each test, and what it was asked."""

    def __init__(self):
        # (status, body: dict, or str sent as is; None = no answer at all), or a function of
        # how many times /health was asked (1 for the first request) that returns one.
        self.health = (200, W18_HEALTH)
        self.models = (200, models_body(TF_NAME))
        self.chat = (200, completion(TF_NAME))  # None: never answer (a silent tensor-parallel hang)
        self.chats = []
        self.health_asked = 0
        self.release = threading.Event()
        # /metrics text, or a function of how many times /metrics was asked that returns it.
        self.metrics = None
        self.metrics_asked = 0


def make_handler(engine):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest's output clean
            pass

        def _send(self, answer):
            if answer is None:  # hold the connection open, answer nothing
                engine.release.wait(120)
                return
            status, body = answer
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path in ("/health", "/v1/health"):
                engine.health_asked += 1
                health = engine.health
                self._send(health(engine.health_asked) if callable(health) else health)
            elif self.path in ("/v1/models", "/models"):
                self._send(engine.models)
            elif self.path == "/metrics" and engine.metrics is not None:
                engine.metrics_asked += 1
                text = engine.metrics(engine.metrics_asked) if callable(engine.metrics) else engine.metrics
                self._send((200, text))
            else:
                self._send((404, {"error": "not found"}))

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            payload = json.loads(self.rfile.read(length) or b"{}")
            if self.path.endswith("/chat/completions"):
                engine.chats.append(payload)
                self._send(engine.chat)
            else:
                self._send((404, {"error": "not found"}))

    return Handler


@pytest.fixture
def engine():
    state = Engine()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()


def run_module(args, check=False):
    """Run the module through ansible; return (exit code, the host's result, output, wall seconds)."""
    command = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, "-m", MODULE, "-a", json.dumps(args)]
    if check:
        command.append("--check")
    started = time.monotonic()
    proc = ansiballz.run(command, cwd=REPO, env=ENV, timeout=300)
    wall = time.monotonic() - started
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc %d): %s %s" % (proc.returncode, proc.stdout, proc.stderr))
    return proc.returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"], proc.stdout + proc.stderr, wall


def documented():
    return yaml.safe_load(wait_for_slots.RETURN)


def assert_documented_keys(result):
    doc = documented()
    assert set(result) - ANSIBLE_KEYS == set(doc), sorted(set(result) ^ set(doc))
    for key in ("ranks", "canary"):
        items = result[key] if isinstance(result[key], list) else [result[key]] if result[key] else []
        for item in items:
            assert set(item) == set(doc[key]["contains"]), (key, sorted(set(item) ^ set(doc[key]["contains"])))


# --- ready --------------------------------------------------------------------------------------

@pytest.mark.parametrize("check", [False, True])
def test_tensorfold_ready_with_8_slots_and_the_canary(engine, check):
    engine.health = (200, health_0600(8))
    rc, result, output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=8, timeout=30), check=check)
    assert rc == 0, output
    assert result["ready"] is True and result["changed"] is False and result["reason"] is None
    assert result["slots"] == 8 and result["models"] == [TF_NAME] and result["ranks"] == []
    assert result["health"]["streams"]["max"] == 8
    assert result["canary"]["ok"] is True and result["canary"]["text"] == "ready" and result["canary"]["tokens"] == 2
    assert 0 <= result["elapsed"] < wall
    # The canary is a short chat completion to the served model (the first id /v1/models lists).
    (chat,) = engine.chats
    assert chat["model"] == TF_NAME and chat["max_tokens"] == 4 and chat["stream"] is False
    assert_documented_keys(result)


def test_canary_that_returns_only_reasoning_is_ok(engine):
    engine.health = (200, health_0600(8))
    engine.chat = (200, completion(TF_NAME, content="", reasoning="The user asks"))
    rc, result, output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, canary_max_tokens=2))
    assert rc == 0, output
    assert result["canary"]["text"] == "The user asks" and engine.chats[0]["max_tokens"] == 2


def test_ready_as_soon_as_the_slots_load(engine):
    # Loading with one slot for three polls; the kit restarts with the caches dropped and all 8 fit.
    engine.health = lambda asked: (200, health_0600(1 if asked <= 3 else 8))
    timeout, interval = 60, 0.5
    rc, result, output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, timeout=timeout, interval=interval))
    assert rc == 0, output
    # Ready at the first poll that saw 8 slots, three intervals in, not at the timeout.
    assert result["slots"] == 8 and engine.health_asked == 4
    assert 3 * interval <= result["elapsed"] <= wall < timeout, (result["elapsed"], wall)


# --- not ready ----------------------------------------------------------------------------------

def test_one_slot_after_the_start_fails_at_once_naming_the_slots_and_the_eviction(engine):
    # The engine fits its slots once, at load: once the start finished (start_finished), a
    # serving engine with 1 slot will not grow to 8 by waiting: fail now, not at the 60 s timeout.
    engine.health = (200, health_0600(1))
    rc, result, output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=8, timeout=60, interval=0.5,
                                               start_finished=True))
    assert rc != 0 and result["failed"] is True
    assert result["msg"].startswith("not ready: /health streams.max reports 1 request slot(s), want 8: "
                                    "page cache counts as used at load on GB10, evict it before starting "
                                    "(dgx_spark.glm53.page_cache_evict)"), result["msg"]
    assert result["reason"] == result["msg"][len("not ready: "):]
    assert result["ready"] is False and result["slots"] == 1 and result["canary"] is None
    assert engine.chats == []  # no canary before the slots are there
    assert engine.health_asked == 1 and wall < 60, (engine.health_asked, wall)  # the first poll, not the timeout
    assert "Traceback" not in output and "module_stderr" not in result
    assert_documented_keys(result)


def test_one_slot_during_a_start_waits_to_the_timeout(engine):
    engine.health = (200, health_0600(1))
    timeout = NOT_READY_WAIT
    rc, result, _output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=8, timeout=timeout, interval=0.5))
    assert rc != 0 and result["msg"].startswith(
        "not ready after %d s: /health streams.max reports 1 request slot(s)" % timeout), result["msg"]
    # Waited out the timeout (measured here) and stopped there (ansible's own start-up is not the module's).
    assert timeout <= wall and timeout <= result["elapsed"] < OVERDUE * timeout, (wall, result["elapsed"])


def test_200_with_ok_false_is_not_ready(engine):
    # seed §1.2: /health answers 200 with {"ok": false} after a rank dies.
    engine.health = (200, health_0600(8, ok=False))
    rc, result, _output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, timeout=NOT_READY_WAIT, interval=0.5))
    assert rc != 0
    assert result["msg"].startswith("not ready after %d s: /health answered 200 with ok: false" % NOT_READY_WAIT), \
        result["msg"]


def test_w18_health_without_a_container_has_no_slot_count(engine):
    rc, result, _output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, timeout=NOT_READY_WAIT, interval=0.5))
    assert rc != 0 and result["slots"] is None
    assert result["msg"] == ("not ready after %d s: no slot count, want 8: the rank-0 log is not read (no head "
                             "container) and /health has no streams.max (images before patch 0600)" % NOT_READY_WAIT)


def test_silent_hang_fails_fast_naming_the_canary(engine):
    engine.health = (200, health_0600(8))
    engine.chat = None  # health ok, models ok, chat never answers
    timeout = 120
    rc, result, output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, timeout=timeout, canary_timeout=2))
    assert rc != 0
    assert result["msg"] == ("canary chat completion returned no tokens within 2 s while /health says ok: the ranks "
                             "look wedged (silent tensor-parallel hang); restart both ranks"), result["msg"]
    assert result["canary"]["ok"] is False and 2 <= result["canary"]["elapsed"] < OVERDUE * 2
    assert result["slots"] == 8 and len(engine.chats) == 1
    assert wall < timeout, wall  # failed at the canary, not at the timeout
    assert_documented_keys(result)


# --- busy, not wedged (a rerun probe of a service in use) ---------------------------------------

def busy_health(inflight=8):
    return dict(W18_HEALTH, inflight=inflight, oldest_s=41.5, idle_s=None)


def tokens_metrics(total):
    return ("# HELP tensorfold_completion_tokens_total Completion tokens.\n"
            "# TYPE tensorfold_completion_tokens_total counter\n"
            'tensorfold_completion_tokens_total{model="%s"} %d\n' % (TF_NAME, total))


def test_every_slot_busy_is_ready_when_the_engine_makes_progress(engine):
    # 8 requests hold the 8 slots: the canary waits its turn and gets nothing in its time.
    engine.health = (200, busy_health())
    engine.chat = None
    engine.metrics = lambda asked: tokens_metrics(1000 + 500 * asked)
    rc, result, output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=1, canary_timeout=2,
                                               busy_ok=True))
    assert rc == 0, output
    assert result["ready"] is True and result["busy"] is True and result["reason"] is None
    assert "no tokens within 2 s" in result["canary"]["error"] and engine.metrics_asked == 2
    assert 2 <= wall < 30


def test_a_slow_health_read_after_the_canary_still_judges_a_busy_engine_busy(engine):
    # The canary spends the deadline (a watchdog tick's is 5 s); the reads after it get their own
    # time. A loaded machine's /health took over the 1 s floor and a busy engine was called wedged.
    def health(asked):
        if asked > 1:
            time.sleep(2.5)
        return 200, busy_health()

    engine.health = health
    engine.chat = None
    engine.metrics = lambda asked: tokens_metrics(1000 + 500 * asked)
    rc, result, output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=1, timeout=2, canary_timeout=2,
                                                busy_ok=True))
    assert rc == 0, output
    assert result["ready"] is True and result["busy"] is True and engine.health_asked == 2


def test_in_flight_without_progress_is_wedged_even_with_busy_ok(engine):
    engine.health = (200, busy_health(inflight=3))
    engine.chat = None
    engine.metrics = tokens_metrics(1000)
    rc, result, output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=1, canary_timeout=2,
                                                busy_ok=True))
    assert rc != 0, output
    assert result["ready"] is False and result["busy"] is False
    assert "wedged" in result["msg"] and "3 request(s) in flight and no token" in result["msg"]


def test_without_busy_ok_a_busy_engine_fails_its_canary(engine):
    engine.health = (200, busy_health())
    engine.chat = None
    engine.metrics = lambda asked: tokens_metrics(1000 + 500 * asked)
    rc, result, output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, slots=1, canary_timeout=2))
    assert rc != 0, output
    assert result["busy"] is False and engine.metrics_asked == 0


def test_nothing_listening_names_the_url():
    with Reserved() as reserved:  # bound, not listening: refused, and nobody else can listen there meanwhile
        port = reserved.port
        rc, result, _output, _wall = run_module(dict(NO_CONTAINERS, url="http://127.0.0.1:%d" % port,
                                                     timeout=NOT_READY_WAIT, interval=0.5))
    assert rc != 0 and result["health"] is None and result["models"] is None
    assert result["msg"] == ("not ready after %d s: /health did not answer at http://127.0.0.1:%d/health: "
                             "ECONNREFUSED (Connection refused)" % (NOT_READY_WAIT, port))


def test_a_wedged_health_endpoint_cannot_hold_the_wait_past_its_deadline(engine):
    engine.health = None  # accepts the connection, never answers
    timeout = 2  # under the 5 s an HTTP request may take: the deadline has to cut it short
    rc, result, _output, wall = run_module(dict(NO_CONTAINERS, url=engine.url, timeout=timeout, interval=1))
    assert rc != 0
    assert result["msg"].startswith("not ready after 2 s: /health did not answer at %s/health: no answer within"
                                    % engine.url), result["msg"]
    assert timeout <= wall and timeout <= result["elapsed"] < OVERDUE * timeout, (wall, result["elapsed"])


# --- vLLM ---------------------------------------------------------------------------------------

def test_vllm_ready(engine):
    engine.health = (200, "")  # vLLM's /health: 200 with an empty body
    engine.models = (200, models_body(VLLM_NAME, owner="vllm"))
    engine.chat = (200, completion(VLLM_NAME, content="Ready"))
    rc, result, output, _wall = run_module(dict(NO_CONTAINERS, mode="vllm", url=engine.url, served_name=VLLM_NAME))
    assert rc == 0, output
    assert result["ready"] is True and result["slots"] is None and result["health"] is None
    assert result["models"] == [VLLM_NAME] and result["canary"]["text"] == "Ready"
    assert engine.chats[0]["model"] == VLLM_NAME
    assert_documented_keys(result)


def test_vllm_not_ready_while_the_served_name_is_missing(engine):
    engine.health = (200, "")
    engine.models = (200, models_body("other-model", owner="vllm"))
    rc, result, _output, _wall = run_module(dict(NO_CONTAINERS, mode="vllm", url=engine.url, served_name=VLLM_NAME,
                                                 timeout=NOT_READY_WAIT, interval=0.5))
    assert rc != 0 and engine.chats == []
    assert result["msg"] == "not ready after %d s: /v1/models lists other-model, not the served name %s" % (
        NOT_READY_WAIT, VLLM_NAME)


def test_vllm_not_ready_while_health_is_not_200(engine):
    engine.health = (503, {"error": "engine not ready"})
    engine.models = (200, models_body(VLLM_NAME, owner="vllm"))
    rc, result, _output, _wall = run_module(dict(NO_CONTAINERS, mode="vllm", url=engine.url, timeout=NOT_READY_WAIT,
                                                 interval=0.5))
    assert rc != 0
    assert result["msg"].startswith("not ready after %d s: /health answered HTTP 503 at %s/health" % (
        NOT_READY_WAIT, engine.url)), result["msg"]


# --- input --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    ({"slots": 0}, "slots must be at least 1, got 0"),
    ({"interval": 10, "timeout": 5}, "interval (10 s) must not exceed timeout (5 s)"),
    ({"mode": "sglang"}, "value of mode must be one of: tensorfold, vllm, got: sglang"),
    ({"workers": [{"container": "glm53-tf-r1"}]}, "missing required arguments: ssh found in workers"),
    ({"head_image": "glm53-tensorfold:lp9001"}, "head_image must be a full image id (sha256: and 64 hex digits"),
    ({"previous_ids": ["3f2c9a0e5b7d"]}, "previous_ids must hold full container ids (64 hex digits), got '3f2c9a0e5b7d'"),
])
def test_bad_options_fail_clearly_without_waiting(engine, args, message):
    rc, result, output, _wall = run_module(dict(NO_CONTAINERS, url=engine.url, **args))
    assert rc != 0 and result["failed"] is True
    assert message in result["msg"], result["msg"]
    assert "module_stderr" not in result and "Traceback" not in output, output
    assert (engine.health_asked, engine.chats) == (0, []), "polled the engine despite bad options"
