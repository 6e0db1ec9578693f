"""The rank link: rendezvous on MASTER:MASTER_PORT and the "collective" after it.

Real TensorFold meets on torch's TCP store and then talks NCCL (and RoCE) over
the CX7 link. Here rank 0 binds MASTER:MASTER_PORT (so MASTER must be one of its
own addresses), rank 1 connects, and the one TCP connection then carries
newline-delimited JSON messages: each completion's request header and rank 1's
answer, plus heartbeats. When the other side goes away (EOF, reset, or no
heartbeat for GLM53_LAB_COLLECTIVE_TIMEOUT_S) the rank logs an NCCL-style line and
exits non-zero, as a rank whose peer died in a collective does.
"""

import errno
import itertools
import json
import os
import socket
import sys
import threading
import time

from tensorfold.sim import env

NCCL_VERSION = "2.27.7"


def log_rank(rank, message):
    """A line in the style torch prefixes onto a rank's errors."""
    env.log("[rank%d]: %s" % (rank, message))


def _ifname():
    return os.environ.get("NCCL_SOCKET_IFNAME", "")


def check_ifname(rank):
    """NCCL refuses to start when NCCL_SOCKET_IFNAME names no interface of this host."""
    name = _ifname()
    if not name:
        return True
    wanted = [item for item in name.lstrip("=^").split(",") if item]
    if name.startswith("^"):
        return True  # an exclusion list: something else is left
    try:
        present = os.listdir("/sys/class/net")
    except OSError:
        return True
    exact = name.startswith("=")
    if any((item in present) if exact else any(dev.startswith(item) for dev in present) for item in wanted):
        return True
    env.log("NCCL WARN Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=%s)" % name)
    log_rank(rank, "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp, internal error - "
             "please report this issue to the NCCL developers, NCCL version %s\nncclInternalError: Internal check "
             "failed. Last error:\nBootstrap : no socket interface found (NCCL_SOCKET_IFNAME=%s)"
             % (NCCL_VERSION, name))
    return False


class RendezvousError(Exception):
    pass


def serve_rendezvous(master, port, timeout):
    """Rank 0: bind MASTER:PORT, wait for rank 1. Returns (socket, its reader, rank 1's hello)."""
    try:
        listener = socket.socket(socket.AF_INET6 if ":" in master else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((master, port))
        listener.listen(4)
    except (OSError, socket.gaierror) as exc:
        code = getattr(exc, "errno", None) or 0
        log_rank(0, "torch.distributed.DistNetworkError: The server socket has failed to bind to %s:%d "
                 "(errno: %d - %s). (MASTER=%s must be an address of this host; NCCL_SOCKET_IFNAME=%s)"
                 % (master, port, code, os.strerror(code) if code else exc, master, _ifname()))
        raise RendezvousError("bind")
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                log_rank(0, "torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. "
                         "1/2 clients joined. (rank 1 never reached %s:%d; NCCL_SOCKET_IFNAME=%s)"
                         % (int(timeout) + 1, master, port, _ifname()))
                raise RendezvousError("timeout")
            listener.settimeout(left)
            try:
                conn, peer = listener.accept()
            except socket.timeout:
                continue
            # Something else may knock on the port (a reachability probe): only rank 1's hello counts.
            conn.settimeout(min(max(deadline - time.monotonic(), 0.1), 5.0))
            reader = conn.makefile("rb")
            try:
                hello = json.loads(reader.readline().decode("utf-8") or "null")
            except (OSError, ValueError):
                hello = None
            if isinstance(hello, dict) and hello.get("t") == "hello" and hello.get("rank") == 1:
                conn.settimeout(None)
                env.log("[tensorfold] rank 1 joined from %s:%d" % (peer[0], peer[1]))
                return conn, reader, hello
            env.log("[tensorfold] rendezvous: ignoring a connection from %s:%d that is not rank 1" % peer[:2])
            reader.close()
            conn.close()
    finally:
        listener.close()


def join_rendezvous(master, port, timeout):
    """Rank 1: connect to MASTER:PORT, retrying until ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            conn = socket.create_connection((master, port), timeout=min(max(left, 0.1), 2.0))
            conn.settimeout(None)
            return conn
        except OSError as exc:
            last = exc
            if exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNRESET):
                time.sleep(min(0.5, max(deadline - time.monotonic(), 0)))
    env.log("[c10d] TCP client failed to connect/validate to host %s:%d - timed out (timeout=%dms): %s"
            % (master, port, int(timeout * 1000), last))
    log_rank(1, "torch.distributed.DistNetworkError: The client socket has timed out after %dms while trying "
             "to connect to (%s, %d). (NCCL_SOCKET_IFNAME=%s)" % (int(timeout * 1000), master, port, _ifname()))
    raise RendezvousError("timeout")


class Link(object):
    """Messages over the connected socket; a reader thread and heartbeats.

    ``on_request(message)`` (rank 1) answers rank 0's requests; rank 0 uses
    ``call`` and waits for the answer with the same id.
    """

    def __init__(self, sock, rank, heartbeat, timeout, reader=None):
        self.sock = sock
        self.rank = rank
        self.peer = 1 - rank
        self.heartbeat = heartbeat
        self.timeout = timeout
        self._reader = reader or sock.makefile("rb")
        self._send_lock = threading.Lock()
        self._waiters = {}
        self._waiters_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._last_heard = time.monotonic()
        self.on_request = None
        self.on_message = None

    # -- plain exchange (rendezvous hello, before the threads run)
    def send(self, message):
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        with self._send_lock:
            self.sock.sendall(data)

    def recv(self):
        line = self._reader.readline()
        if not line:
            return None
        self._last_heard = time.monotonic()
        return json.loads(line.decode("utf-8"))

    # -- the running link
    def start(self):
        for target in (self._read_loop, self._heartbeat_loop):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()

    def call(self, message):
        """Send ``message`` to the peer and wait for its answer (rank 0)."""
        ident = next(self._ids)
        event = threading.Event()
        slot = {"event": event}
        with self._waiters_lock:
            self._waiters[ident] = slot
        message = dict(message, id=ident)
        self.send(message)
        event.wait()
        return slot["reply"]

    def _dead(self, why):
        env.log("NCCL WARN NET/Socket : peer rank %d %s (NCCL_SOCKET_IFNAME=%s)" % (self.peer, why, _ifname()))
        log_rank(self.rank, "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp, "
                 "remote process exited or there was a network error, NCCL version %s\nncclRemoteError: A call "
                 "failed possibly due to a network error or a remote process exiting prematurely. Last error:\n"
                 "socket to rank %d: %s" % (NCCL_VERSION, self.peer, why))
        env.log("[tensorfold] rank %d: the collective with rank %d failed; exiting" % (self.rank, self.peer))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    def _read_loop(self):
        try:
            while True:
                message = self.recv()
                if message is None:
                    self._dead("closed the connection")
                kind = message.get("t")
                if kind == "ping":
                    continue
                if kind == "reply":
                    with self._waiters_lock:
                        slot = self._waiters.pop(message.get("id"), None)
                    if slot is not None:
                        slot["reply"] = message
                        slot["event"].set()
                elif kind == "req" and self.on_request is not None:
                    reply = self.on_request(message)
                    self.send(dict(reply, t="reply", id=message.get("id")))
                elif self.on_message is not None:
                    self.on_message(message)
        except (OSError, ValueError) as exc:
            self._dead("connection error: %s" % exc)

    def _heartbeat_loop(self):
        while True:
            time.sleep(self.heartbeat)
            quiet = time.monotonic() - self._last_heard
            if quiet > self.timeout:
                env.log("[rank%d]:[E ProcessGroupNCCL.cpp] [PG 0 Rank %d] Watchdog caught collective operation "
                        "timeout: WorkNCCL(OpType=ALLGATHER, Timeout(ms)=%d) ran for %d milliseconds before "
                        "timing out." % (self.rank, self.rank, int(self.timeout * 1000), int(quiet * 1000)))
                self._dead("silent for %.0f s" % quiet)
            try:
                self.send({"t": "ping"})
            except OSError as exc:
                self._dead("connection error: %s" % exc)
