"""The simulated vLLM as processes (lab/sim/vllm): two ranks started as the recipe starts
them meet on the master port, load, and rank 0 serves; the API stays closed until then;
a missing, dead, short-of-memory or misconfigured rank fails the start or stops the other
as the README says; the process is one the lab's nvidia-smi counts as a vLLM rank; and the
package installs offline with its console script.

Ports are ephemeral and held (ports.Reserved) until each test ends; the rendezvous timeout
is 1 s where a test waits for it."""

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
from importlib.machinery import SourceFileLoader

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.fake_gpu_driver import GIB, FakeDriver, figures
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.ports import Reserved
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.vllm_sim import (
    NAME, PROJECT, REPO, Proc, make_model, recipe_args, request, sim_env, wait_healthy)

SMI = os.path.join(REPO, "lab", "image", "node", "rootfs", "usr", "local", "bin", "nvidia-smi")
FAST = {"VLLM_SIM_RENDEZVOUS_TIMEOUT": "1"}
# A process that ends with unread bytes (heartbeats) in its socket resets the connection
# instead of closing it: the survivor may read either.
GONE = r"node of rank %d: (connection closed by peer|Connection reset by peer)"


def nvidia_smi():
    loader = SourceFileLoader("nvidia_smi_for_vllm", SMI)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


@pytest.fixture(name="driver", scope="module")
def fixture_driver():
    """A lab node's driver after a deploy: 3.6 of 4 GiB free, room for 0.82 x 4 GiB."""
    with FakeDriver(figures(3.6 * GIB)) as driver:
        yield driver


@pytest.fixture(name="model", scope="module")
def fixture_model(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("vllm"))


class Cluster(object):
    """Ranks of one start; ports held until stop()."""

    def __init__(self, tmp_path, model, driver):
        self.held = [Reserved(), Reserved()]
        self.port, self.master_port = (held.port for held in self.held)
        self.url = "http://127.0.0.1:%d" % self.port
        self.tmp_path, self.model, self.driver = tmp_path, model, driver
        self.procs = []

    def rank(self, rank, extra_args=(), drop=(), **knobs):
        args = [arg for arg in recipe_args(self.model, self.port, self.master_port, rank) if arg not in drop]
        proc = Proc(args + list(extra_args), sim_env(self.driver, **knobs), self.tmp_path, "r%d" % rank)
        self.procs.append(proc)
        return proc

    def stop(self):
        for proc in reversed(self.procs):
            proc.stop()
        for held in self.held:
            held.close()


@pytest.fixture(name="cluster")
def fixture_cluster(tmp_path, model, driver):
    cluster = Cluster(tmp_path, model, driver)
    yield cluster
    cluster.stop()


def refused(url):
    try:
        request(url, "/health", timeout=2)
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, ConnectionRefusedError)
    return False


# --- a good start ----------------------------------------------------------------------------------

def test_two_ranks_meet_load_and_rank0_serves_only_then(cluster):
    r1 = cluster.rank(1, VLLM_SIM_LOAD_SECONDS=0.8)
    r1.wait_for(r"headless multiproc executor, with head node address 127\.0\.0\.1:%d" % cluster.master_port)
    r0 = cluster.rank(0, VLLM_SIM_LOAD_SECONDS=0.8)
    r0.wait_for(r"Starting to load model")
    assert refused(cluster.url)  # vLLM listens only once every rank has loaded
    wait_healthy(cluster.url, r0)
    text = r0.text()
    assert text.index("rank 0 in world size 2") < text.index("Application startup complete.")
    assert "(APIServer pid=%d) INFO:     Application startup complete." % r0.pid in text
    assert "Starting vLLM API server 0 on http://127.0.0.1:%d" % cluster.port in text
    assert "GPU KV cache size:" in text and "Maximum concurrency for 262,144 tokens per request" in text
    assert "rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 1" in r1.text()
    status, body = request(cluster.url, "/v1/models")
    assert status == 200 and [(item["id"], item["max_model_len"]) for item in body["data"]] == [(NAME, 262144)]
    status, body = request(cluster.url, "/v1/chat/completions", {"model": NAME, "max_tokens": 30, "messages": [
        {"role": "user", "content": "What is 12*13?"}]})
    assert status == 200 and body["usage"]["completion_tokens"] <= 30
    # Both ranks are processes the lab's nvidia-smi lists as vLLM ranks (by their /proc cmdline).
    smi = nvidia_smi()
    for proc in (r0, r1):
        with open("/proc/%d/cmdline" % proc.pid, "rb") as handle:
            argv = handle.read().rstrip(b"\0").decode().split("\0")
        assert smi.engine_kind(argv, "python3") == "vllm", argv
    # Stopping rank 0 (docker stop: SIGTERM) ends it cleanly and tells rank 1 to go too.
    r0.signal(signal.SIGTERM)
    assert r0.wait_exit(10) == 0 and r1.wait_exit(10) == 0
    assert "INFO:     Application shutdown complete." in r0.text()


def test_rank1_may_start_after_rank0_within_the_timeout(cluster):
    r0 = cluster.rank(0)
    r0.wait_for(r"world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://127\.0\.0\.1:%d"
                % cluster.master_port)
    time.sleep(0.5)
    cluster.rank(1)
    wait_healthy(cluster.url, r0)


# --- a start that fails ---------------------------------------------------------------------------

def test_rank0_alone_times_out_waiting_for_rank1(cluster):
    r0 = cluster.rank(0, **FAST)
    assert r0.wait_exit(15) == 1
    text = r0.text()
    assert ("(Worker_TP0 pid=%d) torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. "
            "1/2 clients joined." % r0.pid) in text
    assert ("(APIServer pid=%d) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
            "proc(s): {'EngineCore_DP0': 1}" % r0.pid) in text
    assert refused(cluster.url) and "Application startup complete" not in text


def test_rank1_alone_times_out_connecting(cluster):
    r1 = cluster.rank(1, **FAST)
    assert r1.wait_exit(15) == 1
    assert ("torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to connect "
            "to (127.0.0.1, %d)." % cluster.master_port) in r1.text()
    assert "WorkerProc failed to start." in r1.text()


def test_rank1_short_of_memory_fails_both(cluster, tmp_path):
    with FakeDriver(figures(3 * GIB, cached=600 * GIB // 1024)) as small:
        r1 = cluster.rank(1, GLM53_LAB_GPU_SOCK=small.path)
        r0 = cluster.rank(0)
        assert r1.wait_exit(15) == 1 and r0.wait_exit(15) == 1
    assert ("ValueError: Free memory on device cuda:0 (3.0/4.0 GiB) on startup is less than desired GPU memory "
            "utilization (0.82, 3.28 GiB)") in r1.text()
    assert "torch.distributed.DistBackendError: NCCL error" in r0.text()
    assert re.search(GONE % 1, r0.text())


def test_rank1_without_headless_fails_after_its_load(cluster):
    r1 = cluster.rank(1, drop=("--headless",))
    r0 = cluster.rank(0)
    assert r1.wait_exit(15) == 1 and r0.wait_exit(15) == 1
    text = r1.text()
    assert "Starting to load model" in text
    assert "(EngineCore_DP0 pid=%d) AssertionError: collective_rpc should not be called on follower node" % r1.pid in text
    assert "RuntimeError: Engine core initialization failed." in text


def test_headless_on_rank0_never_serves(cluster):
    r0 = cluster.rank(0, extra_args=["--headless"], **FAST)
    assert r0.wait_exit(15) == 1
    assert "Launching 1 data parallel engine(s) in headless mode" in r0.text()
    assert "RuntimeError: Did not receive response from front-end process within 1 seconds" in r0.text()


def test_a_node_of_another_world_size_is_refused(cluster):
    # Rank 0 waits with the default rendezvous timeout: with a 1 s one it could give up before
    # the other process has even started on a loaded machine, and the refusal never happens.
    r0 = cluster.rank(0)
    r0.wait_for(r"world_size=2 rank=0")
    other = cluster.rank(1, extra_args=["--nnodes", "3", "-tp", "3"], **FAST)
    assert other.wait_exit(15) == 1
    assert "RuntimeError: rank 0 at 127.0.0.1:%d refused this node: world size mismatch" % cluster.master_port in (
        other.text())
    # The stranger does not end rank 0's rendezvous: it still waits for its own rank 1.
    assert r0.proc.poll() is None, r0.text()
    assert "Application startup complete" not in r0.text()


def listener(port):
    """Something else listening on a port the test holds (so with SO_REUSEADDR, as vLLM's)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1)
    return sock


def test_busy_ports_fail_the_start(cluster):
    with listener(cluster.master_port):
        r0 = cluster.rank(0, **FAST)
        assert r0.wait_exit(15) == 1
    assert ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE" % cluster.master_port) in r0.text()
    with listener(cluster.port):
        again = cluster.rank(0, **FAST)
        assert again.wait_exit(15) == 1
    assert "OSError: [Errno 98] Address already in use" in again.text()


def test_environment_the_ranks_check(cluster):
    r0 = cluster.rank(0, VLLM_HOST_IP="192.0.2.10", **FAST)
    assert r0.wait_exit(15) == 1
    assert "zmq.error.ZMQError: Cannot assign requested address (addr='tcp://192.0.2.10:0')" in r0.text()
    r1 = cluster.rank(1, NCCL_SOCKET_IFNAME="enp1s0f1np1", **FAST)
    r0 = cluster.rank(0, **FAST)
    assert r1.wait_exit(15) == 1 and r0.wait_exit(15) == 1
    assert "Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=enp1s0f1np1)" in r1.text()


# --- a rank lost while serving ------------------------------------------------------------------------

@pytest.mark.parametrize("victim", [1, 0])
def test_a_dead_rank_stops_the_other(cluster, victim):
    procs = {1: cluster.rank(1), 0: cluster.rank(0)}
    wait_healthy(cluster.url, procs[0])
    procs[victim].signal(signal.SIGKILL)
    survivor = procs[1 - victim]
    assert survivor.wait_exit(15) == 1
    text = survivor.text()
    assert "torch.distributed.DistBackendError: NCCL error in:" in text
    assert re.search(GONE % victim, text)
    assert "Exception in thread" not in text  # its threads end in order, even when it fails
    if victim == 1:
        assert "EngineCore encountered a fatal error." in text and refused(cluster.url)


def test_a_silent_rank_counts_as_lost_after_the_peer_timeout(cluster):
    procs = [cluster.rank(1, VLLM_SIM_PEER_TIMEOUT=1), cluster.rank(0, VLLM_SIM_PEER_TIMEOUT=1)]
    wait_healthy(cluster.url, procs[1])
    procs[0].signal(signal.SIGSTOP)  # alive, connection open, silent: a cut cable
    try:
        assert procs[1].wait_exit(15) == 1
    finally:
        procs[0].signal(signal.SIGCONT)
    assert "node of rank 1: no message for 1 s (VLLM_SIM_PEER_TIMEOUT)" in procs[1].text()


# --- entry points and packaging ----------------------------------------------------------------------

def test_the_api_server_module_serves_a_single_node(tmp_path, model, driver):
    with Reserved() as held:
        # (vLLM's default --gpu-memory-utilization 0.9 wants 3.6 GiB of the node's 4: more than is free)
        proc = Proc(["--model", model, "--port", str(held.port), "--host", "127.0.0.1", "--gpu-memory-utilization",
                     "0.82"], sim_env(driver), tmp_path, "api", module="vllm.entrypoints.openai.api_server", serve=False)
        try:
            wait_healthy("http://127.0.0.1:%d" % held.port, proc)
            status, body = request("http://127.0.0.1:%d" % held.port, "/v1/models")
            assert status == 200 and body["data"][0]["id"] == model  # no --served-model-name: the path
            with open("/proc/%d/cmdline" % proc.pid, "rb") as handle:
                argv = handle.read().rstrip(b"\0").decode().split("\0")
            assert nvidia_smi().engine_kind(argv, "python3") == "vllm"
        finally:
            proc.stop()
    assert proc.proc.returncode == 0


def test_pip_installs_offline_with_the_console_script(tmp_path):
    target = tmp_path / "site"
    build = shutil.copytree(PROJECT, str(tmp_path / "vllm-sim"), ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(target), build], check=True,
                   capture_output=True, text=True)
    assert (target / "vllm" / "entrypoints" / "openai" / "api_server.py").is_file()
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([str(target / "bin" / "vllm"), "--version"], env=env, check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "0.1.dev20051+g487ecf187.sim"
    usage = subprocess.run([str(target / "bin" / "vllm"), "serve", "/model", "-tp", "x"], env=env,
                           capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    assert usage.stderr.splitlines()[-1] == "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'"
