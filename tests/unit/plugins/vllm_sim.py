"""Helpers for the tests of the simulated vLLM (lab/sim/vllm): a model directory, the
environment a rank runs with, a rank as a child process, and HTTP calls to rank 0.

Every wait ends at what it waits for or when the process exits, so a failing start
fails the test at once with the rank's log; the long bounds are only against a hang.
"""

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROJECT = os.path.join(REPO, "lab", "sim", "vllm")
SRC = os.path.join(PROJECT, "src")
NAME = "glm-5.3-flash-nvfp4-sm121"
MODEL_LEN = 262144


def make_model(root, shard=64 * 1024, position_embeddings=MODEL_LEN):
    """A model directory as the recipe mounts it at /model: config.json, the index, two shards."""
    path = os.path.join(str(root), "model")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as handle:
        json.dump({"architectures": ["GlmMoeDsaForCausalLM"], "max_position_embeddings": position_embeddings}, handle)
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as handle:
        json.dump({"weight_map": {}}, handle)
    for index in (1, 2):
        with open(os.path.join(path, "model-0000%d-of-00002.safetensors" % index), "wb") as handle:
            handle.write(b"\0" * shard)
    return path


def sim_env(driver=None, **extra):
    """The child's environment: the package on PYTHONPATH, fast lab knobs, none of the
    host's vLLM/NCCL settings."""
    env = dict((key, value) for key, value in os.environ.items()
               if not key.startswith(("VLLM_", "NCCL_", "GLOO_", "GLM53_", "PYTHON")))
    env.update({"PYTHONPATH": SRC, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                "VLLM_SIM_LOAD_SECONDS": "0.1", "VLLM_SIM_RENDEZVOUS_TIMEOUT": "5", "VLLM_SIM_TOKEN_SECONDS": "0.001",
                "VLLM_SIM_PREFILL_TPS": "1000000", "VLLM_SIM_HEARTBEAT_SECONDS": "0.2"})
    if driver is not None:
        env["GLM53_LAB_GPU_SOCK"] = driver.path
    env.update(dict((key, str(value)) for key, value in extra.items()))
    return env


def recipe_args(model, port, master_port, rank, nnodes=2):
    """`vllm serve` as the recipe's rank-tp2.sh runs it (qualified profile), at lab ports."""
    args = [model, "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
            "--tensor-parallel-size", str(nnodes), "--gpu-memory-utilization", "0.82", "--max-model-len",
            str(MODEL_LEN), "--max-num-seqs", "12", "--max-num-batched-tokens", "8192", "--attention-backend",
            "FLASHINFER_MLA_SPARSE_SM120", "--kv-cache-dtype", "fp8_ds_mla", "--block-size", "256", "--moe-backend",
            "marlin", "--enforce-eager", "--skip-mm-profiling", "--tool-call-parser", "glm47",
            "--enable-auto-tool-choice", "--reasoning-parser", "glm45", "--default-chat-template-kwargs",
            '{"enable_thinking":true,"reasoning_effort":"high"}', "--generation-config", "vllm",
            "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}', "--distributed-executor-backend",
            "mp", "--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port",
            str(master_port)]
    return args + (["--headless"] if rank > 0 else [])


class Proc(object):
    """One `vllm serve` (or api_server) child; stdout and stderr in one log file."""

    def __init__(self, args, env, logdir, label, module="vllm.entrypoints.cli.main", serve=True):
        self.log = os.path.join(str(logdir), "%s.log" % label)
        self.label = label
        argv = [sys.executable, "-m", module] + (["serve"] if serve else []) + list(args)
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    @property
    def pid(self):
        return self.proc.pid

    def text(self):
        with open(self.log) as handle:
            return handle.read()

    def wait_for(self, pattern, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.text(), re.M)
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("%s: no line matching %r (exit %s); log:\n%s"
                             % (self.label, pattern, self.proc.poll(), self.text()))

    def wait_exit(self, timeout=30.0):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s still running after %.0f s; log:\n%s" % (self.label, timeout, self.text()))

    def signal(self, signum):
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def request(url, path, body=None, timeout=10, headers=None):
    """(status, parsed JSON body or text) of one HTTP call."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data,
                                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw, kind = resp.status, resp.read().decode(), resp.headers.get("Content-Type") or ""
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read().decode(), exc.headers.get("Content-Type") or ""
    return status, (json.loads(raw) if kind.startswith("application/json") and raw else raw)


def stream(url, path, body, timeout=10):
    """The ``data:`` payloads of an SSE response, JSON-decoded except ``[DONE]``."""
    conn = http.client.HTTPConnection(url.split("//")[1], timeout=timeout)
    conn.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    events = []
    for raw in resp.read().decode().split("\n\n"):
        if raw.startswith("data: "):
            payload = raw[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    conn.close()
    return events


def wait_healthy(url, proc, timeout=30.0):
    """Poll /health as a deployment does, until 200 (or the rank exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if request(url, "/health", timeout=2)[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if proc.proc.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError("%s: /health never answered 200 (exit %s); log:\n%s"
                         % (proc.label, proc.proc.poll(), proc.text()))


def metric_values(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values
