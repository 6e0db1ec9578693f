"""One node's process, from its checked configuration to serving (rank 0) or following.

What a node is follows from its command line, as in vLLM (config.resolve):
- "api": rank 0 of `vllm serve` (or any rank 0 of the api_server module): the rendezvous
  master, then the HTTP API once every rank has loaded.
- "worker": rank > 0 of `vllm serve --headless`: joins rank 0, loads, follows it.
- "follower-api": rank > 0 started without --headless. vLLM then builds a whole engine on
  it; its workers join and load, and its engine's first collective call fails with
  ``AssertionError: collective_rpc should not be called on follower node``.
- "dp-headless": rank 0 with --headless. vLLM takes it for a data-parallel engine waiting
  for a front-end that never comes: no API, no rendezvous, and after the handshake
  timeout (5 min in vLLM; here at most the rendezvous timeout) a RuntimeError.
Every failure exits 1; a stop by SIGTERM/SIGINT exits 0.
"""

import os
import signal
import socket
import threading
import time

from vllm.sim import api, args as args_mod, config as config_mod, engine as engine_mod, env, log, memory
from vllm.sim.rendezvous import NCCL_VERSION, DistBackendError, Master, Worker, peer_lost
from vllm.version import __version__

ENGINE_FAILED = "Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"


class Shutdown(BaseException):
    """SIGTERM or SIGINT: stop now (BaseException, so no `except Exception` swallows it)."""


class ZMQError(RuntimeError):
    pass


ZMQError.__module__ = "zmq.error"


def on_signal(signum, frame):
    raise Shutdown()


def check_host_ip():
    """vLLM binds its message queues to VLLM_HOST_IP: an address this host does not have fails."""
    address = env.host_ip()
    if not address:
        return
    probe = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((address, 0))
    except OSError as exc:
        raise ZMQError("%s (addr='tcp://%s:0') (VLLM_HOST_IP=%s)" % (exc.strerror, address, address)) from None
    finally:
        probe.close()


def check_devices(config, rank):
    """A node runs world_size / nnodes workers, one a GPU; the lab's node has one GPU."""
    if config.local_world > env.gpus_per_node():
        raise RuntimeError("CUDA error: invalid device ordinal (worker of rank %d wants cuda:%d; this node has %d "
                           "GPU; --tensor-parallel-size %d over --nnodes %d puts %d on each node)"
                           % (rank + 1, 1, env.gpus_per_node(), config.tp, config.nnodes, config.local_world))


def check_interfaces(rank):
    """NCCL_SOCKET_IFNAME (prefixes, '=' exact, '^' excluding) and GLOO_SOCKET_IFNAME (exact names)
    must name interfaces of this host: NCCL and gloo fail at their first use otherwise."""
    present = [name for index, name in socket.if_nameindex()]
    nccl = env.text("NCCL_SOCKET_IFNAME")
    if nccl and not nccl.startswith("^"):
        wanted = [item for item in nccl.lstrip("=").split(",") if item]
        exact = nccl.startswith("=")
        if not any(item in present if exact else any(dev.startswith(item) for dev in present) for item in wanted):
            raise DistBackendError(
                "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2186, internal error - "
                "please report this issue to the NCCL developers, NCCL version %s\nncclInternalError: Internal "
                "check failed.\nLast error:\nBootstrap : no socket interface found (NCCL_SOCKET_IFNAME=%s)"
                % (NCCL_VERSION, nccl))
    gloo = env.text("GLOO_SOCKET_IFNAME")
    for item in [part for part in gloo.split(",") if part]:
        if item not in present:
            raise RuntimeError("[enforce fail at gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find "
                               "address for: %s (GLOO_SOCKET_IFNAME=%s)" % (item, gloo))


def interruptible(seconds, lost):
    """Sleep, raising the peer's loss as soon as `lost()` reports one."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        ending = lost()
        if ending:
            raise peer_lost(*ending)
        time.sleep(min(0.1, max(until - time.monotonic(), 0)))


def load(config, rank, lost):
    """vLLM's start on one node after the rendezvous: the memory check, the weights, the KV cache."""
    name = log.worker(rank)
    figures, source = memory.query(env.gpu_socket())
    log.info("gpu_worker.py:239", "Memory at startup (simulated vLLM: from %s): %.2f GiB free of %.2f GiB, page "
             "cache %.2f GiB counted as used; --gpu-memory-utilization %s wants %.2f GiB"
             % (source, memory.gib(figures["free"]), memory.gib(figures["total"]), memory.gib(figures["cached"]),
                config.util, memory.gib(memory.requested(config.util, figures))), name)
    memory.startup_check(config.util, figures)
    started = time.monotonic()
    log.info("gpu_model_runner.py:2602", "Starting to load model %s..." % config.model, name)
    files = memory.weight_files(config.model)
    if not files:
        raise RuntimeError("Cannot find any model weights with `%s`" % config.model)
    for path in files:  # read them as the load does: the node's page cache holds them afterwards
        with open(path, "rb") as handle:
            while handle.read(1 << 20):
                interruptible(0, lost)
    interruptible(max(env.load_seconds() - (time.monotonic() - started), 0), lost)
    weights = memory.weights_bytes(files) // config.world_size
    took = time.monotonic() - started
    log.info("default_loader.py:267", "Loading weights took %.2f seconds" % took, name)
    log.info("gpu_model_runner.py:2634", "Model loading took %.4f GiB and %.6f seconds" % (weights / memory.GIB, took),
             name)
    kv_bytes, kv_tokens = memory.kv_budget(config.util, figures, weights, env.overhead_bytes(),
                                           env.kv_bytes_per_token(), config.max_model_len)
    log.info("gpu_worker.py:298", "Available KV cache memory: %.2f GiB" % (kv_bytes / memory.GIB), name)
    if not config.args.enforce_eager:
        log.info("gpu_model_runner.py:3480", "Graph capturing finished in 0 secs, took 0.00 GiB", name)
    return {"rank": rank, "kv_tokens": kv_tokens, "free": figures["free"], "total": figures["total"]}


def banner(config, name):
    log.info("model.py:611", "Resolved architecture: %s" % config.architecture, name)
    log.info("model.py:1745", "Using max model len %d" % config.max_model_len, name)
    log.info("scheduler.py:239", "Chunked prefill is enabled with max_num_batched_tokens=%d."
             % config.max_num_batched_tokens, name)


def distributed_line(config, rank):
    address = (config.args.master_addr, config.args.master_port)
    if config.nnodes == 1:  # one node: vLLM's workers meet on a free loopback port
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            address = probe.getsockname()
    log.info("parallel_state.py:1208", "world_size=%d rank=%d local_rank=0 distributed_init_method=tcp://%s:%d "
             "backend=nccl" % ((config.world_size, rank) + tuple(address)), log.worker(rank))


def assigned_line(config, rank):
    log.info("parallel_state.py:1400", "rank %d in world size %d is assigned as DP rank 0, PP rank 0, TP rank %d, EP "
             "rank %d" % (rank, config.world_size, rank, rank), log.worker(rank))


def start_failed(exc, name, api_side=True):
    log.exception(exc, name)
    if api_side:
        log.error("core.py:842", "EngineCore failed to start.", log.ENGINE)
        log.exception(RuntimeError(ENGINE_FAILED), log.API)


def bind_engine(config):
    """The API socket, bound before the engine starts as vLLM binds it (None: the bind failed, logged)."""
    try:
        sock = api.bind(config.host, config.port)
    except OSError as exc:
        log.exception(exc, log.API)
        return None
    log.info("core.py:93", "Initializing a V1 LLM engine (v%s) with config: %s" % (__version__, config.summary()),
             log.ENGINE)
    return sock


def run_api(config):
    sock = bind_engine(config)
    if sock is None:
        return 1
    master = Master(config)
    begun = time.monotonic()
    try:
        check_host_ip()
        check_devices(config, 0)
        master.listen()
        distributed_line(config, 0)
        master.rendezvous()
        assigned_line(config, 0)
        check_interfaces(0)
        reports = [load(config, 0, lambda: master.lost)] + master.wait_ready()
    except Exception as exc:  # pylint: disable=broad-except
        start_failed(exc, log.worker(0))
        master.close(graceful=False)
        sock.close()
        return 1
    except Shutdown:
        master.close(graceful=True)
        sock.close()
        return 0
    kv_tokens = min(report["kv_tokens"] for report in reports)
    log.info("kv_cache_utils.py:1087", "GPU KV cache size: {:,} tokens".format(kv_tokens), log.ENGINE)
    log.info("kv_cache_utils.py:1091", "Maximum concurrency for {:,} tokens per request: {:.2f}x".format(
        config.max_model_len, kv_tokens / float(config.max_model_len)), log.ENGINE)
    log.info("core.py:210", "init engine (profile, create kv cache, warmup model) took %.2f seconds"
             % (time.monotonic() - begun), log.ENGINE)
    return serve(config, master, sock, engine_mod.Engine(config, kv_tokens))


def serve(config, master, sock, engine):
    """Rank 0 from its API's opening to its end: 0 when stopped, 1 when a rank was lost."""
    done = threading.Event()
    outcome = []
    server = None

    def node_lost(rank, why):
        log.exception(peer_lost(rank, why), log.worker(0))
        log.error("core.py:718", "EngineCore encountered a fatal error.", log.ENGINE)
        log.error("async_llm.py:480", "AsyncLLM output_handler failed.", log.API)
        outcome.append(1)
        done.set()

    try:
        server = api.open_api(config, engine, sock)
        threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True, name="http").start()
        master.on_lost = node_lost
        if master.lost is not None:  # lost between the last report and now
            node_lost(*master.lost)
        if not config.args.disable_log_stats:
            threading.Thread(target=engine.log_stats, args=(env.stats_interval(), done), daemon=True).start()
        while not done.wait(1.0):
            pass
    except Shutdown:
        outcome[:] = [0]
        log.uvicorn("Shutting down")
        log.uvicorn("Waiting for application shutdown.")
        log.uvicorn("Application shutdown complete.")
        log.uvicorn("Finished server process [%d]" % os.getpid())
    done.set()
    if server is not None:
        server.shutdown()  # the accept loop ends before its socket closes: no error from that thread
        server.server_close()
    else:
        sock.close()
    master.close(graceful=not outcome or outcome[0] == 0)
    return outcome[0] if outcome else 0


def run_worker(config):
    rank = config.first_rank
    name = log.worker(rank)
    log.info("serve.py:233", "Launching vLLM (v%s) headless multiproc executor, with head node address %s:%d for "
             "torch.distributed process group." % (__version__, config.args.master_addr, config.args.master_port))
    worker = Worker(config)
    try:
        check_host_ip()
        check_devices(config, rank)
        distributed_line(config, rank)
        worker.join()
        assigned_line(config, rank)
        check_interfaces(rank)
        worker.report(load(config, rank, worker.lost_yet))
        ending = worker.wait_end()
    except Exception as exc:  # pylint: disable=broad-except
        log.exception(exc, name)
        log.error("multiproc_executor.py:671", "WorkerProc failed to start.", name)
        worker.close()
        return 1
    except Shutdown:
        worker.close()
        return 0
    worker.close()
    if ending[0] == "bye":
        log.info("multiproc_executor.py:702", "Rank 0 stopped; shutting down.", name)
        return 0
    log.exception(peer_lost(0, ending[1]), name)
    return 1


def run_follower_api(config):
    """Rank > 0 without --headless: a whole engine, doomed once its workers have loaded."""
    rank = config.first_rank
    sock = bind_engine(config)
    if sock is None:
        return 1
    worker = Worker(config)
    try:
        check_host_ip()
        check_devices(config, rank)
        distributed_line(config, rank)
        worker.join()
        assigned_line(config, rank)
        load(config, rank, worker.lost_yet)
        raise AssertionError("collective_rpc should not be called on follower node")
    except Exception as exc:  # pylint: disable=broad-except
        start_failed(exc, log.ENGINE if isinstance(exc, AssertionError) else log.worker(rank))
        return 1
    except Shutdown:
        return 0
    finally:
        worker.close()
        sock.close()


def run_dp_headless(config):
    log.info("serve.py:256", "Launching 1 data parallel engine(s) in headless mode, with head node address "
             "tcp://127.0.0.1:29550.")
    log.info("core.py:648", "Waiting for init message from front-end.", log.ENGINE)
    wait = min(config.timeout, 300.0)
    try:
        time.sleep(wait)
    except Shutdown:
        return 0
    log.exception(RuntimeError("Did not receive response from front-end process within %d seconds (vLLM waits 5 "
                               "minutes): --headless on node rank 0 starts no API server" % wait), log.ENGINE)
    return 1


ROLES = {"api": run_api, "worker": run_worker, "follower-api": run_follower_api, "dp-headless": run_dp_headless}


def main(args, entry):
    """Run a parsed `vllm serve` / api_server command line; the process's exit code."""
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    name = None if entry == "serve" and args.headless else log.API
    try:
        if name:
            log.info("api_server.py:1839", "vLLM API server version %s" % __version__, name)
        log.info("utils.py:328", "non-default args: %s" % args_mod.non_default(args), name)
        env.validate()
        config = config_mod.resolve(args, entry)
        banner(config, name)
        return ROLES[config.role](config)
    except Shutdown:
        return 0
    except (ValueError, env.KnobError) as exc:
        log.exception(exc, name)
        return 1
