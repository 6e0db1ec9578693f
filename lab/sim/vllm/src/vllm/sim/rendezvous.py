"""The ranks' rendezvous on --master-addr:--master-port and the link that stays after it.

Real vLLM (multiprocessing executor, --nnodes > 1) meets in torch.distributed: rank 0's
worker runs a TCP store server on the master port (on every address of the host) and
every worker, rank 0's too, connects to master-addr:master-port as a client; then NCCL
carries the tensors. Here the node of rank 0 listens on the master port of every address
(torch's bind), checks that master-addr reaches it (its own client's connection), and
each other node connects, retrying, and keeps that one TCP connection as its link to
rank 0. On the link travel newline-terminated lines:

    node -> rank 0   HELLO {"node_rank", "nnodes", "world_size", "local", "host", "pid"}
    rank 0 -> node   WELCOME | REJECT <why>          the hello's answer
    rank 0 -> nodes  JOINED <ranks joined> <world size>   whenever it changes
    rank 0 -> nodes  START                           every rank joined: load
    node -> rank 0   READY {"kv_tokens", ...}        loaded; rank 0 opens its API when all are
    rank 0 -> nodes  BYE                             rank 0 stops on purpose
    both ways        PING                            every VLLM_SIM_HEARTBEAT_SECONDS
    (self-check)     SELF <token> / SELF <token>     rank 0 reaching itself through master-addr

A link is lost on EOF, a reset, or VLLM_SIM_PEER_TIMEOUT seconds without a line (a peer
behind a cut cable sends no FIN). The errors are torch's, with their messages.
"""

import errno
import json
import os
import secrets
import socket
import threading
import time

from vllm.sim import env

NCCL_VERSION = "2.30.7"


class DistNetworkError(RuntimeError):
    pass


class DistStoreError(RuntimeError):
    pass


class DistBackendError(RuntimeError):
    pass


for cls in (DistNetworkError, DistStoreError, DistBackendError):
    cls.__module__ = "torch.distributed"  # how the traceback's last line names them


def peer_lost(peer, why):
    """What a rank gets from NCCL when the rank at the other end of its collectives is gone."""
    return DistBackendError("NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2186, remote "
                            "process exited or there was a network error, NCCL version %s\nncclRemoteError: A call "
                            "failed possibly due to a network error or a remote process exiting prematurely.\nLast "
                            "error:\nnode of rank %s: %s" % (NCCL_VERSION, peer, why))


class Link(object):
    """One TCP connection between rank 0 and another node, read by a thread of its own."""

    def __init__(self, sock, peer, on_message, on_lost, pending=b""):
        self.sock = sock
        self.peer = peer  # the node rank at the other end
        self.on_message = on_message
        self.on_lost = on_lost
        self.pending = pending  # bytes read past the hello
        self.closed = threading.Event()
        self.send_lock = threading.Lock()

    def start(self):
        threading.Thread(target=self.read, daemon=True, name="link-read-%s" % self.peer).start()
        threading.Thread(target=self.beat, daemon=True, name="link-beat-%s" % self.peer).start()

    def send(self, text):
        try:
            with self.send_lock:
                self.sock.sendall((text + "\n").encode("utf-8"))
        except OSError as exc:
            self.lose("send failed: %s" % exc)

    def read(self):
        beat, limit = env.heartbeat_seconds(), env.peer_timeout()
        self.sock.settimeout(min(beat, limit))
        data, last = self.pending, time.monotonic()
        while not self.closed.is_set():
            while b"\n" in data:
                text, data = data.split(b"\n", 1)
                text = text.decode("utf-8", "replace").strip()
                if text and text != "PING":
                    self.on_message(self, text)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                if time.monotonic() - last > limit:
                    self.lose("no message for %d s (VLLM_SIM_PEER_TIMEOUT)" % limit)
                continue
            except OSError as exc:
                self.lose(os.strerror(exc.errno) if exc.errno else str(exc))
                return
            if not chunk:
                self.lose("connection closed by peer")
                return
            data, last = data + chunk, time.monotonic()

    def beat(self):
        while not self.closed.wait(env.heartbeat_seconds()):
            self.send("PING")

    def lose(self, why):
        if self.closed.is_set():
            return
        self.close()
        self.on_lost(self, why)

    def close(self):
        self.closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def read_line(sock, deadline):
    """(first line, bytes after it) from a socket, or (None, b"") at the deadline or EOF."""
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, b""
        sock.settimeout(left)
        try:
            chunk = sock.recv(4096)
        except OSError:
            return None, b""
        if not chunk:
            return None, b""
        data += chunk
    text, rest = data.split(b"\n", 1)
    return text.decode("utf-8", "replace").strip(), rest


def connect(addr, port, deadline):
    """A connection to addr:port, retried until the deadline (torch's client retries too)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return socket.create_connection((addr, port), timeout=min(left, 2.0))
        except OSError:
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def connect_timeout(addr, port, timeout):
    return DistNetworkError("The client socket has timed out after %dms while trying to connect to (%s, %d)."
                            % (int(timeout * 1000), addr, port))


def wait_timeout(timeout, joined, world_size):
    return DistStoreError("Timed out after %d seconds waiting for clients. %d/%d clients joined."
                          % (int(timeout) + 1, joined, world_size))


class Master(object):
    """Rank 0's side: the listener, the other nodes' links, their reports."""

    def __init__(self, config):
        self.config = config
        self.cond = threading.Condition()
        self.joined = {0: config.local_world}  # node rank -> ranks it brings
        self.links = {}
        self.ready = {}
        self.started = False
        self.lost = None  # (node rank, why) of the first node lost after START
        self.on_lost = None  # set while serving: called with (node rank, why)
        self.token = secrets.token_hex(8)
        self.listener = None

    def count(self):
        return sum(self.joined.values())

    def listen(self):
        if self.config.nnodes == 1:
            return
        port = self.config.args.master_port
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
            sock.listen(64)
        except OSError as exc:
            sock.close()
            code = exc.errno or 0
            raise DistNetworkError("The server socket has failed to listen on any local network address. port: %d, "
                                   "useIpv6: false, code: -%d, name: %s, message: %s"
                                   % (port, code, errno.errorcode.get(code, "?"), os.strerror(code).lower())) from None
        self.listener = sock
        threading.Thread(target=self.accept, daemon=True, name="rendezvous-accept").start()

    def accept(self):
        while True:
            try:
                conn = self.listener.accept()[0]
            except OSError:
                return  # closed
            threading.Thread(target=self.greet, args=(conn,), daemon=True).start()

    def greet(self, conn):
        text, rest = read_line(conn, time.monotonic() + 10)
        if text and text.startswith("SELF "):
            try:
                conn.sendall(("SELF %s\n" % self.token).encode())
            except OSError:
                pass
            conn.close()
            return
        if not text or not text.startswith("HELLO "):
            conn.close()
            return
        try:
            hello = json.loads(text[len("HELLO "):])
            rank = int(hello["node_rank"])
        except (ValueError, KeyError, TypeError):
            conn.close()
            return
        with self.cond:
            why = self.refuse(hello, rank)
            if why is None:
                link = Link(conn, rank, self.message, self.drop, rest)
                self.links[rank] = link
                self.joined[rank] = int(hello.get("local", 1))
                link.send("WELCOME")
                link.start()
                self.announce()
        if why is not None:
            try:
                conn.sendall(("REJECT %s\n" % why).encode())
            except OSError:
                pass
            conn.close()

    def refuse(self, hello, rank):
        """Why a hello is turned away, or None. (Called with the lock held.)"""
        config = self.config
        if self.started:
            return ("the rendezvous of rank 0 at %s:%d is over (it completed with %d ranks); restart every node to "
                    "start again" % (config.args.master_addr, config.args.master_port, self.count()))
        if hello.get("world_size") != config.world_size or hello.get("nnodes") != config.nnodes:
            return ("world size mismatch: this node has world_size=%s nnodes=%s, rank 0 has world_size=%d nnodes=%d"
                    % (hello.get("world_size"), hello.get("nnodes"), config.world_size, config.nnodes))
        if rank in self.joined:
            return "node rank %d has already joined (two nodes were started with --node-rank %d)" % (rank, rank)
        return None

    def announce(self):
        for link in list(self.links.values()):
            link.send("JOINED %d %d" % (self.count(), self.config.world_size))
        self.cond.notify_all()

    def message(self, link, text):
        if text.startswith("READY "):
            with self.cond:
                self.ready[link.peer] = json.loads(text[len("READY "):])
                self.cond.notify_all()

    def drop(self, link, why):
        with self.cond:
            if self.links.get(link.peer) is not link:
                return
            if not self.started:
                # Gone before the rendezvous completed: its place is free for a new start of it.
                del self.links[link.peer]
                del self.joined[link.peer]
                self.announce()
                return
            if self.lost is None:
                self.lost = (link.peer, why)
            self.cond.notify_all()
            callback = self.on_lost
        if callback is not None:
            callback(link.peer, why)

    def self_check(self, deadline):
        """torch's rank 0 is a client of its own store: master-addr must reach this host."""
        addr, port = self.config.args.master_addr, self.config.args.master_port
        while time.monotonic() < deadline:
            sock = connect(addr, port, deadline)
            if sock is None:
                break
            try:
                sock.sendall(("SELF %s\n" % self.token).encode())
                text = read_line(sock, deadline)[0]
            except OSError:
                text = None
            sock.close()
            if text == "SELF %s" % self.token:
                return
            time.sleep(0.2)  # another host's listener: not ours, as good as unreachable
        raise connect_timeout(addr, port, self.config.timeout)

    def rendezvous(self):
        """Wait for every rank; then tell the nodes to load. One node: nothing to wait for (vLLM's
        workers then meet on a loopback port of their own, not on --master-port)."""
        if self.config.nnodes == 1:
            self.started = True
            return
        timeout = self.config.timeout
        deadline = time.monotonic() + timeout
        self.self_check(deadline)
        with self.cond:
            while self.count() < self.config.world_size:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise wait_timeout(timeout, self.count(), self.config.world_size)
                self.cond.wait(min(left, 0.5))
            self.started = True
            links = list(self.links.values())
        for link in links:
            link.send("START")

    def wait_ready(self):
        """The other nodes' load reports; a node lost meanwhile fails rank 0's start too."""
        with self.cond:
            while len(self.ready) < len(self.links) and self.lost is None:
                self.cond.wait(0.5)
            if self.lost is not None:
                raise peer_lost(*self.lost)
            return list(self.ready.values())

    def close(self, graceful):
        if self.listener is not None:
            self.listener.close()
        for link in list(self.links.values()):
            if graceful:
                link.send("BYE")
            link.close()


class Worker(object):
    """The side of a node of rank > 0."""

    def __init__(self, config):
        self.config = config
        self.cond = threading.Condition()
        self.link = None
        self.joined = (1, config.world_size)
        self.started = False
        self.ending = None  # ("bye", None) or ("lost", why)

    def join(self):
        config = self.config
        addr, port, timeout = config.args.master_addr, config.args.master_port, config.timeout
        deadline = time.monotonic() + timeout
        sock = connect(addr, port, deadline)
        if sock is None:
            raise connect_timeout(addr, port, timeout)
        hello = {"node_rank": config.node_rank, "nnodes": config.nnodes, "world_size": config.world_size,
                 "local": config.local_world, "host": socket.gethostname(), "pid": os.getpid()}
        try:
            sock.sendall(("HELLO %s\n" % json.dumps(hello)).encode())
        except OSError:
            pass
        text, rest = read_line(sock, deadline)
        if text is None or not (text == "WELCOME" or text.startswith("REJECT ")):
            sock.close()
            raise DistNetworkError("failed to recv, got 0 bytes from (%s, %d): not a rank 0 of the simulated vLLM, "
                                   "or it went away" % (addr, port))
        if text.startswith("REJECT "):
            sock.close()
            raise RuntimeError("rank 0 at %s:%d refused this node: %s" % (addr, port, text[len("REJECT "):]))
        self.link = Link(sock, 0, self.message, self.drop, rest)
        self.link.start()
        with self.cond:
            while not self.started and self.ending is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.link.close()
                    raise wait_timeout(timeout, *self.joined)
                self.cond.wait(min(left, 0.5))
            if not self.started:
                raise peer_lost(0, self.ending[1] or "rank 0 stopped")

    def message(self, link, text):
        with self.cond:
            if text.startswith("JOINED "):
                parts = text.split()
                self.joined = (int(parts[1]), int(parts[2]))
            elif text == "START":
                self.started = True
            elif text == "BYE" and self.ending is None:
                self.ending = ("bye", None)
            self.cond.notify_all()

    def drop(self, link, why):
        with self.cond:
            if self.ending is None:
                self.ending = ("lost", why)
            self.cond.notify_all()

    def report(self, facts):
        self.link.send("READY " + json.dumps(facts))

    def lost_yet(self):
        with self.cond:
            return self.ending

    def wait_end(self):
        """Block until rank 0 says goodbye or is lost: ("bye", None) or ("lost", why)."""
        with self.cond:
            while self.ending is None:
                self.cond.wait(1.0)
            return self.ending

    def close(self):
        if self.link is not None:
            self.link.close()
