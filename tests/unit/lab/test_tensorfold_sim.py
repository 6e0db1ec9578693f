"""The simulated TensorFold engine (lab/sim/tensorfold): two real rank processes on 127.0.0.1.

What the kit's scripts and the collection read from the real engine is checked
from the outside: boot lines on stdout, the HTTP API of rank 0, the request log,
the rank link (rendezvous, a dead peer, mismatched builds), the lab fault
switches and the slot count that follows the memory "the driver" reports (a fake
glm53-lab-gpud socket per rank) and the weights' page-cache residency. Residency is
set with posix_fadvise and read back with util-linux fincore, never with the
simulator's own measurement.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.page_cache_oracle import (
    MIB,
    evictable_base,
    footprint,
    resident_total,
    write_file,
)
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.fake_gpu_driver import GIB, FakeDriver, figures
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.ports import Reserved
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import OVERDUE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROJECT = os.path.join(REPO, "lab", "sim", "tensorfold")
SRC = os.path.join(PROJECT, "src")
OVERLAY = os.path.join(REPO, "lab", "sim", "profile-overlay")
OVERLAY_FILES = ("cuda/server.py", "cuda/health.py", "families/glm5_next/cuda/batch.py",
                 "families/glm5_next/cuda/decode.py", "families/glm5_next/cuda/engine.py",
                 "families/glm5_next/cuda/knobs.py")
NAME = "glm-5.3-flash"
CONTEXT = 65536
SHARD = 17 * MIB
METRICS = ("requests_total", "request_errors_total", "requests_rejected_total", "prompt_tokens_total",
           "cached_tokens_total", "completion_tokens_total", "decode_rounds_total", "decode_seconds_total",
           "prefill_seconds_total", "requests_inflight", "requests_stalled", "engine_fatal", "uptime_seconds")
CHAT = {"messages": [{"role": "user", "content": "What is 12*13? Answer briefly."}], "max_tokens": 400}


# The lab's slot rule at its defaults (sim/memory.py) for this module's model: two 17 MiB
# shards, the C8 profile's 2 GiB session store on a 4 GiB node.
LAB_SLOT, LAB_RESERVE, SESSION = 256 * MIB, 896 * MIB, 64 * MIB
WEIGHTS = 2 * SHARD
NEED_8 = WEIGHTS + SESSION + 7 * LAB_SLOT + LAB_RESERVE
DRIVERS = []  # the module's default driver: room for all 8 slots (closed at the module's end)


def ample_driver():
    if not DRIVERS:
        DRIVERS.append(FakeDriver(figures(NEED_8 + 512 * MIB)))
    return DRIVERS[0]


@pytest.fixture(autouse=True, scope="module")
def close_drivers():
    yield
    while DRIVERS:
        DRIVERS.pop().close()


# --- helpers -------------------------------------------------------------------------

def evict(paths):
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def make_model(root):
    """An HF-cache snapshot: shards are links into blobs/, as huggingface_hub lays them out."""
    repo = os.path.join(root, "models--org--GLM-sim")
    snapshot = os.path.join(repo, "snapshots", "0123abcd")
    os.makedirs(snapshot)
    shards = []
    for index in (1, 2):
        blob = write_file(os.path.join(repo, "blobs", "blob%d" % index), SHARD)
        os.symlink("../../blobs/blob%d" % index, os.path.join(snapshot, "model-0000%d-of-00002.safetensors" % index))
        shards.append(blob)
    for name, body in (("config.json", {"model_type": "glm_moe_dsa"}), ("generation_config.json", {})):
        with open(os.path.join(snapshot, name), "w") as handle:
            json.dump(body, handle)
    return snapshot, shards


def engine_env(sessions, pythonpath=SRC, **extra):
    env = dict((key, value) for key, value in os.environ.items()
               if not key.startswith(("GLM53_", "NCCL_", "MASTER", "RANK", "PYTHON")))
    env.update({
        "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "GLM53_LAB_BOOT_S": "0.2", "GLM53_LAB_ROUND_S": "0.001", "GLM53_LAB_PREFILL_TPS": "100000",
        "GLM53_LAB_RDZV_TIMEOUT_S": "5", "GLM53_LAB_SWITCH_DIR": sessions,
        "GLM53_TF_REQUEST_LOG": os.path.join(sessions, "requests.jsonl"), "GLM53_TF_LAUNCH_T0": "%.3f" % time.time(),
        "NCCL_SOCKET_IFNAME": "lo", "GLM53_TF_BATCH": "8", "GLM53_TF_KV_POOL_TOKENS": "1048576",
        "GLM53_TF_LATENT_KV": "1", "GLM53_TF_KV_DTYPE": "fp8", "GLM53_TF_BATCH_RESERVE_GB": "11",
        "GLM53_TF_SESSION_GIB": "2", "GLM53_TF_BATCH_ADMIT_GB": "0.25", "GLM53_LAB_GPU_SOCK": ample_driver().path,
    })
    env.update(extra)
    return env


class Rank(object):
    def __init__(self, rank, model, env, master, master_port, port, logdir, args=()):
        self.rank = rank
        self.log = os.path.join(logdir, "r%d-%d.log" % (rank, master_port))
        argv = [sys.executable, "-m", "tensorfold", "serve", model, "--tp", "2", "--rank", str(rank),
                "--master", master, "--master-port", str(master_port), "--no-update-check",
                "--context", str(CONTEXT), "--name", NAME, "--max-tokens", "4096"] + list(args)
        if rank == 0:
            argv += ["--host", "127.0.0.1", "--port", str(port)]
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def text(self):
        with open(self.log) as handle:
            return handle.read()

    def lines(self):
        return self.text().splitlines()

    # Only a guard against a hang: the wait ends at the line, or when the rank exits (a rank
    # waits GLM53_LAB_RDZV_TIMEOUT_S for its peer, then gives up), whichever comes first.
    def wait_for(self, pattern, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.text(), re.M)
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("rank %d: no line matching %r (exit %s); log:\n%s"
                             % (self.rank, pattern, self.proc.poll(), self.text()))

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("rank %d still running after %.0f s; log:\n%s" % (self.rank, timeout, self.text()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Pair(object):
    """Rank 0 and rank 1 of one start; ``url`` is rank 0's API.

    Both ports stay reserved (ports.Reserved) until ``stop()``: rank 0 binds them with
    SO_REUSEADDR, nothing else can take them before it does.
    """

    def __init__(self, model, logdir, env0, env1=None, args=()):
        self.reserved = [Reserved(), Reserved()]
        self.port, master_port = (reserved.port for reserved in self.reserved)
        self.url = "http://127.0.0.1:%d" % self.port
        self.r0 = Rank(0, model, env0, "127.0.0.1", master_port, self.port, logdir, args)
        self.r1 = Rank(1, model, env1 or env0, "127.0.0.1", master_port, None, logdir, args)

    def ready(self):
        self.r0.wait_for(r"^\[tensorfold\] serving ")
        self.r1.wait_for(r"^\[tensorfold\] rank 1 of 2 ready")
        return self

    def stop(self):
        self.r1.stop()
        self.r0.stop()
        for reserved in self.reserved:
            reserved.close()


def request(url, path, body=None, timeout=10):
    """(status, parsed body or text) of one HTTP call."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw, kind = resp.status, resp.read().decode(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read().decode(), exc.headers.get("Content-Type", "")
    return status, (json.loads(raw) if kind.startswith("application/json") else raw)


def stream(url, path, body, timeout=10):
    """The ``data:`` payloads of an SSE response, JSON-decoded except ``[DONE]``."""
    conn = http.client.HTTPConnection(url.split("//")[1], timeout=timeout)
    conn.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    events = []
    for raw in resp.read().decode().split("\n\n"):
        if raw.startswith("data: "):
            payload = raw[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    conn.close()
    return events


def metric_values(text):
    values = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def patched_package(tmp):
    """A copy of the package with the lp9001 overlay copied over it, as Dockerfile.logprobs does."""
    root = os.path.join(tmp, "lp9001")
    shutil.copytree(os.path.join(SRC, "tensorfold"), os.path.join(root, "tensorfold"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for relative in OVERLAY_FILES:
        shutil.copyfile(os.path.join(OVERLAY, relative), os.path.join(root, "tensorfold", relative))
    return root


# --- fixtures ----------------------------------------------------------------------

@pytest.fixture(name="workdir", scope="module")
def fixture_workdir():
    path = os.path.join(evictable_base(), "tf-sim-%d" % os.getpid())
    os.makedirs(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(name="model", scope="module")
def fixture_model(workdir):
    return make_model(os.path.join(workdir, "hf"))


@pytest.fixture(name="sessions")
def fixture_sessions(tmp_path):
    path = tmp_path / "sessions"
    path.mkdir()
    return str(path)


@pytest.fixture(name="pair", scope="module")
def fixture_pair(model, workdir):
    """The kit build on both ranks, started with the weights evicted (so 8 slots)."""
    snapshot, shards = model
    sessions = os.path.join(workdir, "sessions")
    os.makedirs(sessions)
    evict(shards)
    pair = Pair(snapshot, workdir, engine_env(sessions))
    pair.sessions = sessions
    try:
        yield pair.ready()
    finally:
        pair.stop()


@pytest.fixture(name="lp_package", scope="module")
def fixture_lp_package(workdir):
    return patched_package(workdir)


# --- boot, models, health, metrics --------------------------------------------------

def test_boot_lines_in_the_kits_shapes(pair):
    text = pair.r0.text()
    for pattern in (
            r"^\[boot\] r0 \+\d+\.\ds container started$",
            r"^\[boot\] r0 \+\d+\.\ds weights: \d+\.\d+ GB on the GPU ",
            r"^\[tensorfold\] batching 8 requests: 7 extra sequence\(s\), ",
            r"^\[tensorfold\] KV pool \(patches/0290\): 1048576 tokens in 4096 pages of 256, .* shared by the 8 slots",
            r"^\[tensorfold\] context: 65536 tokens a request \(max_model_len; [^)]*\); KV cache: [^;]+; "
            r"8 request slot\(s\); KV pool: ",
            r"^\[tensorfold\] serving glm-5\.3-flash at http://127\.0\.0\.1:%d/v1 on CUDA, rank 0 of 2 "
            r"\(.*; loaded in \d+\.\ds\)$" % pair.port):
        assert re.search(pattern, text, re.M), "no line matching %r in:\n%s" % (pattern, text)
    assert "only" not in text, "a shortfall line after a start with the weights evicted:\n" + text
    # What the kit's serve.sh and the seed's tf-prod.sh parse:
    assert re.findall(r"([0-9]+) request slot\(s\)", text)[-1] == "8"
    assert re.findall(r"batching ([0-9]+) requests", text)[-1] == "8"
    assert re.search(r"^\[boot\] r1 \+\d+\.\ds container started$", pair.r1.text(), re.M)
    lines = pair.r0.lines()
    assert lines.index(next(line for line in lines if "serving" in line)) == len(lines) - 1


def test_models_health_and_404(pair):
    status, body = request(pair.url, "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    entry = body["data"][0]
    assert (entry["id"], entry["object"], entry["owned_by"]) == (NAME, "model", "tensorfold")
    assert entry["max_model_len"] == entry["context_length"] == CONTEXT
    assert request(pair.url, "/models")[1] == body

    for path in ("/health", "/v1/health"):
        status, health = request(pair.url, path)
        assert status == 200
        assert set(health) == {"ok", "mode", "uptime_s", "inflight", "oldest_s", "idle_s", "requests", "errors"}
        assert health["ok"] is True and health["mode"] == "basic" and health["inflight"] == 0
    assert request(pair.url, "/nope") == (404, {"error": "not found"})
    assert request(pair.url, "/v1/nope", {"x": 1}) == (404, {"error": "not found"})
    assert request(pair.url, "/v1/metrics")[0] == 404


def test_metrics_names_types_and_label(pair):
    status, text = request(pair.url, "/metrics")
    assert status == 200
    for name in METRICS:
        metric = "tensorfold_" + name
        kind = "counter" if name.endswith("_total") else "gauge"
        assert re.search(r"^# HELP %s \S" % metric, text, re.M), metric
        assert re.search(r"^# TYPE %s %s$" % (metric, kind), text, re.M), metric
        assert re.search(r'^%s\{model="%s"\} [0-9.]+$' % (metric, re.escape(NAME)), text, re.M), metric
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(samples) == len(METRICS)
    conn = http.client.HTTPConnection(pair.url.split("//")[1], timeout=5)
    conn.request("GET", "/metrics")
    assert conn.getresponse().getheader("Content-Type") == "text/plain; version=0.0.4"
    conn.close()


# --- completions -----------------------------------------------------------------------

def test_chat_non_streamed_reasoning_usage_cache_and_determinism(pair):
    before = metric_values(request(pair.url, "/metrics")[1])
    status, first = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=7))
    assert status == 200, first
    assert first["object"] == "chat.completion" and first["model"] == NAME
    assert first["id"].startswith("chatcmpl-")
    choice = first["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "stop"
    assert message["role"] == "assistant" and message["content"].strip()
    assert message["reasoning"] and message["reasoning_content"] == message["reasoning"]  # default: both fields
    assert choice["logprobs"] is None
    usage = first["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] > len(message["content"].split())  # reasoning counts too
    assert isinstance(first["tensorfold"], dict) and "keeps" in first["tensorfold"]  # the kit: full stats

    status, again = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=7))
    assert again["choices"][0]["message"] == message  # same prompt and seed, same text
    cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < again["usage"]["prompt_tokens"]
    other = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=8))[1]
    assert other["choices"][0]["message"]["content"] != message["content"]

    off = request(pair.url, "/v1/chat/completions",
                  dict(CHAT, chat_template_kwargs={"enable_thinking": False}))[1]["choices"][0]["message"]
    assert off["content"] and not off["reasoning"]

    # The kit has no logprobs: asked for, answered null.
    asked = request(pair.url, "/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=3))[1]
    assert asked["choices"][0]["logprobs"] is None

    after = metric_values(request(pair.url, "/metrics")[1])
    label = '{model="%s"}' % NAME
    assert after["tensorfold_requests_total" + label] - before["tensorfold_requests_total" + label] == 5
    assert after["tensorfold_cached_tokens_total" + label] > before["tensorfold_cached_tokens_total" + label]


def test_chat_streamed(pair):
    events = stream(pair.url, "/v1/chat/completions", dict(CHAT, stream_options={"include_usage": True}))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len(chunks) >= 3
    assert all(chunk["object"] == "chat.completion.chunk" and chunk["model"] == NAME for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    reasoning = "".join(delta.get("reasoning", "") for delta in deltas)
    assert reasoning and reasoning == "".join(delta.get("reasoning_content", "") for delta in deltas)
    content = "".join(delta.get("content", "") or "" for delta in deltas)
    assert content.strip()
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert all(chunk["choices"][0]["finish_reason"] is None for chunk in chunks[:-1])
    assert last["usage"]["completion_tokens"] > 0 and isinstance(last["usage"]["prompt_tokens"], int)
    assert "tensorfold" in last
    # Streamed and not, the same text.
    whole = request(pair.url, "/v1/chat/completions", CHAT)[1]["choices"][0]["message"]
    assert (content, reasoning) == (whole["content"], whole["reasoning"])


def test_max_tokens_n_and_context_limits(pair):
    cut = request(pair.url, "/v1/chat/completions", dict(CHAT, max_tokens=5))[1]
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] == 5

    status, body = request(pair.url, "/v1/chat/completions", dict(CHAT, n=2))
    assert status == 400 and body["error"]["param"] == "n"
    status, body = request(pair.url, "/v1/chat/completions", dict(CHAT, max_tokens=CONTEXT))
    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded" and body["error"]["type"] == "invalid_request_error"
    status, body = request(pair.url, "/v1/chat/completions", dict(CHAT, temperature="hot"))
    assert status == 400 and body["error"]["param"] == "temperature"


# --- ignore_eos and min_tokens: replies that honour max_tokens -------------------------------

def chunks_text(events, field):
    """The concatenated ``field`` of a stream's deltas (chat) or texts (completions)."""
    out = []
    for chunk in events[:-1]:
        choice = chunk["choices"][0]
        part = choice["delta"].get(field) if "delta" in choice else choice.get(field)
        out.append(part or "")
    return "".join(out)


def test_ignore_eos_runs_to_max_tokens_streamed_or_not(pair):
    plain = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=5))[1]
    assert plain["choices"][0]["finish_reason"] == "stop"
    assert plain["usage"]["completion_tokens"] < 150  # the fake model ends a reply after a few dozen tokens
    body = dict(CHAT, seed=5, max_tokens=600, ignore_eos=True)
    status, held = request(pair.url, "/v1/chat/completions", body)
    assert status == 200, held
    choice = held["choices"][0]
    assert choice["finish_reason"] == "length"
    assert held["usage"]["completion_tokens"] == 600  # reasoning tokens count toward max_tokens
    message, before = choice["message"], plain["choices"][0]["message"]
    assert message["reasoning"] == before["reasoning"]  # the same reply, then on past the EOS
    assert message["content"].startswith(before["content"]) and len(message["content"].split()) > 300
    stats = held["tensorfold"]
    assert 600 / 4 <= stats["rounds"] <= 600  # MTP drafts (no drafter): 1-4 tokens a round
    assert stats["decode_s"] >= stats["rounds"] * 0.001 - 0.001  # GLM53_LAB_ROUND_S a round at least

    events = stream(pair.url, "/v1/chat/completions", dict(body, stream_options={"include_usage": True}))
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens"] == 600
    assert chunks_text(events, "content") == message["content"]
    assert chunks_text(events, "reasoning") == message["reasoning"]

    text = {"prompt": "count the sheep", "max_tokens": 300, "ignore_eos": True}
    status, done = request(pair.url, "/v1/completions", text)
    assert status == 200, done
    assert done["choices"][0]["finish_reason"] == "length" and done["usage"]["completion_tokens"] == 300
    events = stream(pair.url, "/v1/completions", dict(text, stream_options={"include_usage": True}))
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens"] == 300
    assert chunks_text(events, "text") == done["choices"][0]["text"]
    assert request(pair.url, "/v1/completions", dict(text, ignore_eos=False))[1]["choices"][0]["finish_reason"] \
        == "stop"


def test_min_tokens_holds_off_eos_and_stop_strings(pair):
    plain = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=9))[1]
    natural, content = plain["usage"]["completion_tokens"], plain["choices"][0]["message"]["content"]
    for body in (dict(CHAT, seed=9, min_tokens=natural + 40),
                 dict(CHAT, seed=9, min_tokens=natural + 40, stream=True, stream_options={"include_usage": True})):
        if body.get("stream"):
            last = stream(pair.url, "/v1/chat/completions", body)[-2]
            finish, usage = last["choices"][0]["finish_reason"], last["usage"]
        else:
            held = request(pair.url, "/v1/chat/completions", body)[1]
            finish, usage = held["choices"][0]["finish_reason"], held["usage"]
            assert held["choices"][0]["message"]["content"].startswith(content)
            assert len(held["choices"][0]["message"]["content"]) > len(content)
        # EOS comes at the first position it may: after min_tokens tokens.
        assert (finish, usage["completion_tokens"]) == ("stop", natural + 40)
    same = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=9, min_tokens=natural))[1]
    assert same["choices"][0]["message"] == plain["choices"][0]["message"]
    capped = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=9, max_tokens=natural + 20,
                                                            min_tokens=natural + 20))[1]
    assert capped["choices"][0]["finish_reason"] == "length"
    assert capped["usage"]["completion_tokens"] == natural + 20

    # A stop string ends the reply, but not inside its first min_tokens tokens (as in vLLM).
    first = re.match(r"\s?\w+|\S", content).group()
    cut = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=9, stop=[first]))[1]["choices"][0]
    assert (cut["message"]["content"], cut["finish_reason"]) == ("", "stop")
    kept = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=9, stop=[first], min_tokens=natural))[1]
    assert kept["choices"][0]["message"]["content"] == content
    assert kept["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_ignore_eos_and_min_tokens_bad_values_are_400(pair, path):
    base = CHAT if "chat" in path else {"prompt": "count", "max_tokens": 400}
    for value in ("yes", 1, 0, [], {}):
        status, body = request(pair.url, path, dict(base, ignore_eos=value))
        assert status == 400 and body["error"]["param"] == "ignore_eos", (value, body)
    for value in (-1, "5", 1.5, True, []):
        status, body = request(pair.url, path, dict(base, min_tokens=value))
        assert status == 400 and body["error"]["param"] == "min_tokens", (value, body)
    status, body = request(pair.url, path, dict(base, min_tokens=401, stream=True))
    assert status == 400 and body["error"]["param"] == "min_tokens" and "max_tokens=400" in body["error"]["message"]
    unbounded = dict(base)
    del unbounded["max_tokens"]
    status, body = request(pair.url, path, dict(unbounded, min_tokens=4097))  # past --max-tokens 4096
    assert status == 400 and body["error"]["param"] == "min_tokens"
    status, body = request(pair.url, path, dict(base, ignore_eos=None, min_tokens=None))
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop"


def test_tokenize_and_token_id_completions(pair):
    status, body = request(pair.url, "/tokenize", {"prompt": "hello there, world"})
    assert status == 200
    assert body["count"] == len(body["tokens"]) > 0 and body["max_model_len"] == CONTEXT
    assert body["token_strs"] is None
    chat = request(pair.url, "/v1/tokenize", {"messages": CHAT["messages"]})[1]
    assert chat["count"] > 0

    ids = body["tokens"]
    status, done = request(pair.url, "/v1/completions", {"prompt": ids, "max_tokens": 8})
    assert status == 200
    assert done["object"] == "text_completion" and done["id"].startswith("cmpl-")
    assert done["usage"]["prompt_tokens"] == len(ids)
    assert done["choices"][0]["text"] and done["choices"][0]["logprobs"] is None


def test_request_log_one_line_a_finished_request(pair):
    path = os.path.join(pair.sessions, "requests.jsonl")
    before = open(path).read().splitlines() if os.path.exists(path) else []
    request(pair.url, "/v1/chat/completions", CHAT)
    request(pair.url, "/v1/chat/completions", CHAT)
    lines = open(path).read().splitlines()[len(before):]
    assert len(lines) == 2
    for line in lines:
        record = json.loads(line)
        for field in ("ts", "start", "finish", "prompt", "cached", "decode_tokens", "decode_s", "prefill_s",
                      "queue_s", "first_s", "kv_free"):
            assert field in record, field
        assert record["finish"] == "stop" and record["ts"] >= record["start"]
        assert 0 < record["kv_free"] <= 4096
        assert "What is" not in line  # no text
    assert json.loads(lines[1])["cached"] > 0


def test_hang_switch_keeps_health_but_never_yields_a_token(pair):
    switch = os.path.join(pair.sessions, "lab-hang")
    open(switch, "w").close()
    try:
        with pytest.raises(socket.timeout):
            request(pair.url, "/v1/chat/completions", CHAT, timeout=1.5)
        status, health = request(pair.url, "/health")
        assert status == 200 and health["ok"] is True
        assert request(pair.url, "/v1/models")[0] == 200
        conn = http.client.HTTPConnection(pair.url.split("//")[1], timeout=1.5)
        conn.request("POST", "/v1/chat/completions", json.dumps(dict(CHAT, stream=True)))
        resp = conn.getresponse()
        first = resp.fp.readline() + resp.fp.readline()
        assert b'"role": "assistant"' in first  # the stream opened
        with pytest.raises(socket.timeout):
            resp.fp.readline()  # but no token comes
        status, health = request(pair.url, "/health")
        assert health["inflight"] >= 1 and health["oldest_s"] >= 1.0
        conn.close()
    finally:
        os.unlink(switch)
    deadline = time.monotonic() + 60  # dropped at once when the switch goes; 60 s only guards a hang
    while request(pair.url, "/health")[1]["inflight"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert request(pair.url, "/health")[1]["inflight"] == 0  # the given-up requests were dropped
    assert request(pair.url, "/v1/chat/completions", CHAT)[0] == 200


# --- slots: a request beyond them waits ---------------------------------------------------------

def test_a_ninth_request_waits_fifo_for_a_free_slot(model, workdir, sessions):
    """8 slots held by ignore_eos replies of known length (--no-drafts: one token a round):
    the 9th and 10th wait, in order, and take a slot as one frees."""
    round_s, short, held, extra = 0.01, 150, 300, 50
    log = os.path.join(sessions, "requests.jsonl")
    evict(model[1])  # 8 slots: the weights are not in the page cache
    pair = Pair(model[0], workdir, engine_env(sessions, GLM53_LAB_ROUND_S=str(round_s)), args=["--no-drafts"])
    threads, answers, done = [], {}, {}

    def send(name, tokens):
        body = {"messages": [{"role": "user", "content": "hold a slot: %s" % name}], "max_tokens": tokens,
                "ignore_eos": True}
        answers[name] = request(pair.url, "/v1/chat/completions", body, timeout=60)
        done[name] = time.monotonic()

    def start(name, tokens):
        threads.append(threading.Thread(target=send, args=(name, tokens), daemon=True))
        threads[-1].start()

    try:
        pair.ready()
        assert re.findall(r"([0-9]+) request slot\(s\)", pair.r0.text())[-1] == "8"
        start("short", short)  # the first to free its slot
        for index in range(7):
            start("held%d" % index, held)
        deadline = time.monotonic() + 60  # only guards a hang: all 8 run within moments
        while request(pair.url, "/health")[1]["inflight"] < 8:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        start("ninth", extra)
        time.sleep(0.2)
        start("tenth", extra + 1)
        time.sleep(0.2)
        # inflight counts running completions: the two waiting ones are not in it.
        assert request(pair.url, "/health")[1]["inflight"] == 8
        assert metric_values(request(pair.url, "/metrics")[1])['tensorfold_requests_inflight{model="%s"}' % NAME] == 8
        for thread in threads:
            thread.join(90)
        for name, (status, body) in answers.items():
            assert status == 200, (name, body)
            assert body["choices"][0]["finish_reason"] == "length"
            tokens = body["usage"]["completion_tokens"]
            assert body["tensorfold"]["rounds"] == tokens  # --no-drafts: one token a round
            assert body["tensorfold"]["decode_s"] >= tokens * round_s - 0.001  # N tokens: N rounds of ROUND_S
        assert len(answers) == 10
        ninth, tenth = answers["ninth"][1]["tensorfold"], answers["tenth"][1]["tensorfold"]
        assert ninth["queue_s"] > 0.1 and tenth["queue_s"] > 0.1, (ninth, tenth)
        # The 9th took the short reply's slot and finished while the 7 long ones still ran; the 10th
        # (FIFO) had to wait for the 9th's slot.
        assert done["ninth"] < min(done["held%d" % index] for index in range(7)), done
        assert done["ninth"] < done["tenth"], done

        records = [json.loads(line) for line in open(log).read().splitlines()]
        by_budget = dict((record["max_tokens"], record) for record in records)  # short, 9th, 10th: unique
        assert (by_budget[extra]["queue_s"], by_budget[extra + 1]["queue_s"]) == (ninth["queue_s"], tenth["queue_s"])

        def admitted(record):
            return record["start"] + record["queue_s"]

        def ended(record):
            return admitted(record) + record["prefill_s"] + record["decode_s"]

        # Admitted as a slot freed, not before: the 9th at the short reply's end, the 10th at the 9th's
        # (either would be over a second early if it had not waited). The log's start is the arrival,
        # a little before the wait began: 0.25 s of room for a loaded machine.
        assert admitted(by_budget[extra]) >= ended(by_budget[short]) - 0.25, records
        assert admitted(by_budget[extra + 1]) >= ended(by_budget[extra]) - 0.25, records
        assert admitted(by_budget[extra]) < min(ended(record) for record in records if record["max_tokens"] == held)
    finally:
        pair.stop()


# --- the lp9001 overlay and mismatched builds --------------------------------------------

def test_overlay_import_check(lp_package):
    check = ("from tensorfold.families.glm5_next.cuda import decode; from tensorfold.cuda import server; "
             "assert decode.logprob_rows and server.logprobs_request and server.response_stats; "
             "print('patches/9001-9004 ok')")
    env = dict(os.environ, PYTHONPATH=lp_package)
    assert subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True,
                          check=True).stdout == "patches/9001-9004 ok\n"
    unpatched = subprocess.run([sys.executable, "-c", check], env=dict(os.environ, PYTHONPATH=SRC),
                               capture_output=True, text=True, check=False)
    assert unpatched.returncode == 1 and "AttributeError" in unpatched.stderr


def test_logprobs_with_the_overlay(model, workdir, lp_package, sessions, pair):
    kit = pair
    pair = Pair(model[0], workdir, engine_env(sessions, pythonpath=lp_package))
    try:
        pair.ready()
        plain = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=3))[1]
        body = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=3, logprobs=True, top_logprobs=3))[1]
        choice = body["choices"][0]
        assert choice["message"] == plain["choices"][0]["message"]  # same text with or without logprobs
        entries = choice["logprobs"]["content"]
        assert "".join(entry["token"] for entry in entries) == choice["message"]["content"]  # answer tokens only
        for entry in entries:
            assert entry["logprob"] <= 0 and entry["bytes"] == list(entry["token"].encode())
            tops = entry["top_logprobs"]
            assert len(tops) == 3 and all(top["logprob"] <= 0 for top in tops)
            assert [top["logprob"] for top in tops] == sorted((top["logprob"] for top in tops), reverse=True)
            assert entry["logprob"] <= tops[0]["logprob"]
        assert plain["choices"][0]["logprobs"] is None
        assert "keeps" not in body["tensorfold"] and "rounds" in body["tensorfold"]  # 9004 summary

        events = stream(pair.url, "/v1/chat/completions", dict(CHAT, seed=3, logprobs=True))
        for chunk in events[:-1]:
            delta = chunk["choices"][0]["delta"]
            if delta.get("content"):
                tokens = chunk["choices"][0]["logprobs"]["content"]
                assert "".join(item["token"] for item in tokens) == delta["content"]
            else:
                assert chunk["choices"][0]["logprobs"] is None

        legacy = request(pair.url, "/v1/completions", {"prompt": "count", "max_tokens": 6, "logprobs": 2})[1]
        lp = legacy["choices"][0]["logprobs"]
        assert "".join(lp["tokens"]) == legacy["choices"][0]["text"]
        assert len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == len(lp["tokens"])
        assert all(len(top) == 2 for top in lp["top_logprobs"])

        status, bad = request(pair.url, "/v1/chat/completions", dict(CHAT, top_logprobs=2))
        assert status == 400 and bad["error"]["param"] == "logprobs"
        status, bad = request(pair.url, "/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=21))
        assert status == 400 and bad["error"]["param"] == "logprobs"
        # 9002: short exact replies stop at <|assistant|> instead of running into a fake next turn.
        leaked = 0
        for index in range(8):
            short = {"messages": [{"role": "user", "content": "Say hi %d" % index}],
                     "chat_template_kwargs": {"enable_thinking": False}}
            fixed = request(pair.url, "/v1/chat/completions", short)[1]["choices"][0]["message"]["content"]
            raw = request(kit.url, "/v1/chat/completions", short)[1]["choices"][0]["message"]["content"]
            assert raw.startswith(fixed)
            leaked += raw != fixed
        assert leaked
        # ignore_eos and min_tokens in the patched build: past the EOS the text is the same with
        # logprobs as without, every answer token with its entry.
        long_plain = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=3, max_tokens=500, ignore_eos=True))[1]
        long_lp = request(pair.url, "/v1/chat/completions", dict(CHAT, seed=3, max_tokens=500, ignore_eos=True,
                                                                 logprobs=True, top_logprobs=2))[1]
        for body in (long_plain, long_lp):
            assert (body["choices"][0]["finish_reason"], body["usage"]["completion_tokens"]) == ("length", 500)
        assert long_lp["choices"][0]["message"] == long_plain["choices"][0]["message"]
        entries = long_lp["choices"][0]["logprobs"]["content"]
        assert "".join(entry["token"] for entry in entries) == long_lp["choices"][0]["message"]["content"]
        assert all(entry["logprob"] <= 0 and len(entry["top_logprobs"]) == 2 for entry in entries)
        short = {"messages": [{"role": "user", "content": "Say hi"}], "chat_template_kwargs": {"enable_thinking": False}}
        natural = request(pair.url, "/v1/chat/completions", short)[1]["usage"]["completion_tokens"]
        held = request(pair.url, "/v1/chat/completions", dict(short, min_tokens=natural + 5))[1]  # past 9002's stop
        assert (held["choices"][0]["finish_reason"], held["usage"]["completion_tokens"]) == ("stop", natural + 5)
        full = request(pair.url, "/v1/chat/completions", dict(CHAT, tensorfold_stats="full"))[1]
        assert "keeps" in full["tensorfold"]
        assert "tensorfold" not in request(pair.url, "/v1/chat/completions", dict(CHAT, tensorfold_stats="off"))[1]
    finally:
        pair.stop()


@pytest.mark.parametrize("patched_rank", [0, 1])
def test_mismatched_builds_fail_the_first_request(model, workdir, lp_package, sessions, patched_rank):
    patched, plain = engine_env(sessions, pythonpath=lp_package), engine_env(sessions)
    envs = (patched, plain) if patched_rank == 0 else (plain, patched)
    pair = Pair(model[0], workdir, envs[0], envs[1])
    try:
        pair.ready()  # the start itself does not notice
        assert request(pair.url, "/health")[1]["ok"] is True
        status, body = request(pair.url, "/v1/chat/completions", CHAT)
        assert status == 500
        assert "header mismatch" in body["error"]["message"]
        status, health = request(pair.url, "/health")
        assert status == 200 and health["ok"] is False and "header mismatch" in health["fatal"]
        assert "header mismatch" in pair.r1.text()
    finally:
        pair.stop()


# --- fault switches and dead ranks -----------------------------------------------------------

def test_fatal_switch_strict_mode(model, workdir, sessions):
    pair = Pair(model[0], workdir, engine_env(sessions, GLM53_TF_HEALTH="strict"))
    try:
        pair.ready()
        assert request(pair.url, "/health")[1]["ok"] is True
        open(os.path.join(sessions, "lab-fatal"), "w").close()
        status, health = request(pair.url, "/health")
        assert status == 503 and health["ok"] is False and health["mode"] == "strict" and health["fatal"]
        assert request(pair.url, "/v1/chat/completions", CHAT)[0] == 503
        metrics = metric_values(request(pair.url, "/metrics")[1])
        assert metrics['tensorfold_engine_fatal{model="%s"}' % NAME] == 1
        os.unlink(os.path.join(sessions, "lab-fatal"))
        assert request(pair.url, "/health")[0] == 503  # fatal stays until a restart
    finally:
        pair.stop()


@pytest.mark.parametrize("victim", [1, 0])
def test_a_dead_rank_takes_the_other_down(model, workdir, sessions, victim):
    pair = Pair(model[0], workdir, engine_env(sessions))
    try:
        pair.ready()
        dead, survivor = (pair.r1, pair.r0) if victim == 1 else (pair.r0, pair.r1)
        dead.proc.kill()
        # Reaped: gone for good. A killed process closes its sockets one by one as it exits; a
        # request sent meanwhile can still be queued on rank 0's listener and then reset.
        dead.proc.wait()
        assert survivor.wait_exit(60) != 0  # it sees the link close at once; 60 s only guards a hang
        assert re.search(r"^\[rank%d\]: torch\.distributed\.DistBackendError: NCCL error" % survivor.rank,
                         survivor.text(), re.M), survivor.text()
        assert "the collective with rank %d failed" % victim in survivor.text()
        with pytest.raises(urllib.error.URLError):
            request(pair.url, "/health", timeout=2)
    finally:
        pair.stop()


def test_rank1_with_a_wrong_master_times_out(model, workdir, sessions):
    timeout = 1.5
    env = engine_env(sessions, GLM53_LAB_RDZV_TIMEOUT_S=str(timeout))
    with Reserved("127.0.0.2") as reserved:  # nothing listens there while the rank tries
        port = reserved.port
        started = time.monotonic()
        rank = Rank(1, model[0], env, "127.0.0.2", port, None, workdir)
        assert rank.wait_exit(60) == 1
        wall = time.monotonic() - started
    # Its own clock starts after the interpreter did: never sooner than the timeout. The rest of
    # OVERDUE times it is room for the interpreter's start on a loaded machine.
    assert timeout <= wall < OVERDUE * timeout, wall
    assert re.search(r"^\[rank1\]: torch\.distributed\.DistNetworkError: The client socket has timed out after "
                     r"1500ms while trying to connect to \(127\.0\.0\.2, %d\)\. \(NCCL_SOCKET_IFNAME=lo\)$" % port,
                     rank.text(), re.M), rank.text()


def test_rank0_alone_gives_up_and_a_foreign_master_cannot_bind(model, workdir, sessions):
    env = engine_env(sessions, GLM53_LAB_RDZV_TIMEOUT_S="1")
    with Reserved() as master, Reserved() as http:
        alone = Rank(0, model[0], env, "127.0.0.1", master.port, http.port, workdir)
        assert alone.wait_exit(60) == 1  # gives up after its 1 s; 60 s only guards a hang
    assert re.search(r"^\[rank0\]: torch\.distributed\.DistStoreError: Timed out after \d+ seconds waiting for "
                     r"clients\. 1/2 clients joined\.", alone.text(), re.M), alone.text()
    with Reserved() as master, Reserved() as http:
        foreign = Rank(0, model[0], env, "192.0.2.7", master.port, http.port, workdir)  # TEST-NET-1, not ours
        assert foreign.wait_exit(60) == 1
    assert re.search(r"^\[rank0\]: torch\.distributed\.DistNetworkError: The server socket has failed to bind to "
                     r"192\.0\.2\.7:\d+ \(errno: 99 - Cannot assign requested address\)", foreign.text(), re.M)


def test_a_probe_on_the_master_port_does_not_break_the_rendezvous(model, workdir, sessions):
    env = engine_env(sessions)
    reserved = [Reserved(), Reserved()]
    port, master_port = (r.port for r in reserved)
    rank0 = Rank(0, model[0], env, "127.0.0.1", master_port, port, workdir)
    rank1 = None
    try:
        while True:  # a reachability probe (nc -z): connect and hang up
            try:
                socket.create_connection(("127.0.0.1", master_port), timeout=1).close()
                break
            except OSError:
                # Until rank 0 listens; it gives up by itself (GLM53_LAB_RDZV_TIMEOUT_S) if it never does.
                assert rank0.proc.poll() is None, rank0.text()
                time.sleep(0.05)
        rank1 = Rank(1, model[0], env, "127.0.0.1", master_port, None, workdir)
        rank0.wait_for(r"^\[tensorfold\] serving ")
        assert "ignoring a connection" in rank0.text()
        assert request("http://127.0.0.1:%d" % port, "/v1/chat/completions", CHAT)[0] == 200
    finally:
        for rank in (rank1, rank0):
            if rank is not None:
                rank.stop()
        for held in reserved:
            held.close()


def test_unknown_nccl_interface_stops_the_rank(model, workdir, sessions):
    with Reserved() as master:
        rank = Rank(1, model[0], engine_env(sessions, NCCL_SOCKET_IFNAME="enp9s9f9np9"), "127.0.0.1", master.port,
                    None, workdir)
        assert rank.wait_exit(60) == 1  # stops at once; 60 s only guards a hang
    assert "Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=enp9s9f9np9)" in rank.text()


# --- slots follow the driver's free memory and the weights' residency ---------------------------

def slots(text):
    return re.findall(r"([0-9]+) request slot\(s\)", text)[-1]


def test_slots_follow_free_memory_the_fewer_rank_decides(workdir, sessions, model):
    snapshot, shards = model
    evict(shards)
    # Rank 1's node has room for 4 further slots: both serve 5, rank 0 names rank 1.
    with FakeDriver(figures(WEIGHTS + SESSION + 4 * LAB_SLOT + LAB_RESERVE, cached=GIB)) as short:
        pair = Pair(snapshot, workdir, engine_env(sessions), engine_env(sessions, GLM53_LAB_GPU_SOCK=short.path))
        try:
            pair.ready()
            r0, r1 = pair.r0.text(), pair.r1.text()
        finally:
            pair.stop()
        assert short.asked == 1
    assert re.search(r"^\[tensorfold\] rank 0: \d+ MiB free of 4096 MiB at load \(page cache 0 MiB, counted as used "
                     r"on GB10; from %s\); 8 of 8 slot\(s\) fit: weights 34 MiB \+ session store 64 MiB \+ 256 MiB "
                     r"a further slot \+ 896 MiB reserve$" % re.escape(ample_driver().path), r0, re.M), r0
    assert "rank 1: 2018 MiB free of 4096 MiB at load (page cache 1024 MiB" in r1 and "5 of 8 slot(s) fit" in r1
    assert re.search(r"^\[tensorfold\] GLM53_TF_BATCH=8: only 5 sequence\(s\) fit with GLM53_TF_BATCH_RESERVE_GB=11 "
                     r"kept free \(rank 1 had 2018 MiB free of 4096 MiB at load, with 1024 MiB of page cache counted "
                     r"as used, as on GB10; .*\) and the session store's 2\.0 GiB; serving that many$", r0, re.M), r0
    assert slots(r0) == slots(r1) == "5"
    assert re.findall(r"batching ([0-9]+) requests", r0)[-1] == "5"


def test_warm_weights_cost_their_copy_unless_mapped(workdir, sessions):
    snapshot, shards = make_model(os.path.join(workdir, "residency"))
    full = sum(footprint(path) for path in shards)
    # One MiB short of 8 slots with the weights to copy.
    tight = FakeDriver(figures(NEED_8 - MIB))

    def start(**extra):
        pair = Pair(snapshot, workdir, engine_env(sessions, GLM53_LAB_GPU_SOCK=tight.path, **extra))
        try:
            pair.ready()
            return pair.r0.text()
        finally:
            pair.stop()

    try:
        evict(shards)
        assert resident_total(shards) == 0, "fincore: the shards are still cached after fadvise DONTNEED"
        cold = start()
        assert "page cache holds 0% of the weights" in cold and slots(cold) == "7"
        # The start read the weights (as a load does): they are in the page cache now.
        assert resident_total(shards) > full // 2, "fincore: the load did not leave the shards cached"
        warm = start()  # copy (the default): the same weights to copy, the same 7
        assert re.search(r"page cache holds [1-9][0-9]*% of the weights", warm) and slots(warm) == "7"
        mapped = start(GLM53_LAB_LOAD="mapped")  # mapped: what is cached needs no room
        assert "not in the page cache yet (of 34 MiB, GLM53_LAB_LOAD=mapped)" in mapped and slots(mapped) == "8"
        evict(shards)
        assert resident_total(shards) == 0
        assert slots(start(GLM53_LAB_LOAD="mapped")) == "7"  # cold: all of it to load
    finally:
        tight.close()


def test_without_a_driver_socket_memfree_decides(workdir, sessions, model):
    # This machine's MemFree: a little is enough (no session store, 1 MiB a slot and kept free).
    pair = Pair(model[0], workdir, engine_env(sessions, GLM53_LAB_GPU_SOCK="/nonexistent/gpu.sock", GLM53_TF_BATCH="2",
                                              GLM53_TF_SESSION_GIB="0", GLM53_LAB_SLOT_MIB="1",
                                              GLM53_LAB_RESERVE_MIB="1"))
    try:
        pair.ready()
        text = pair.r0.text()
    finally:
        pair.stop()
    assert "from /proc/meminfo MemFree, no /nonexistent/gpu.sock)" in text and slots(text) == "2"


def test_unset_batch_means_one_slot(workdir, sessions, model):
    env = engine_env(sessions)
    del env["GLM53_TF_BATCH"]
    pair = Pair(model[0], workdir, env)
    try:
        pair.ready()
        text = pair.r0.text()
        assert re.findall(r"([0-9]+) request slot\(s\)", text)[-1] == "1"
        assert "batching" not in text and "only" not in text
    finally:
        pair.stop()


# --- packaging -------------------------------------------------------------------------------

def test_pip_installs_offline_with_the_console_script(tmp_path):
    target = tmp_path / "site"
    build = shutil.copytree(PROJECT, str(tmp_path / "TensorFold"), ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(target), build], check=True,
                   capture_output=True, text=True)
    assert (target / "tensorfold" / "families" / "glm5_next" / "cuda" / "knobs.py").is_file()
    out = subprocess.run([str(target / "bin" / "tensorfold"), "--version"], env=dict(os.environ, PYTHONPATH=str(target)),
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == "tensorfold 0.3.4+sim"
    usage = subprocess.run([str(target / "bin" / "tensorfold"), "serve", "/m", "--tp", "2", "--rank", "1",
                            "--master", "10.0.0.1", "--port", "8000"], env=dict(os.environ, PYTHONPATH=str(target)),
                           capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "rank 1 has no HTTP server" in usage.stderr
