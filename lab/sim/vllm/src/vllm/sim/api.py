"""Rank 0's HTTP API: vLLM's OpenAI-compatible server, served by uvicorn there.

Like vLLM, the socket is bound early (so a port in use fails the start at once) and
listens only once the engine has loaded: until then a client's connection is refused.
Routes: /health (200, empty body), /ping, /version, /load, /metrics, /v1/models,
/v1/chat/completions and /v1/completions (streamed as SSE or not); anything else is
FastAPI's 404 ``{"detail": "Not Found"}``. With --api-key (or VLLM_API_KEY) the /v1 routes
want ``Authorization: Bearer KEY`` (else 401 ``{"error": "Unauthorized"}``).
"""

import json
import os
import queue
import select
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vllm.sim import engine as engine_mod, log, model, protocol
from vllm.version import __version__

GET_ROUTES = ("/health", "/ping", "/version", "/load", "/metrics", "/v1/models")
POST_ROUTES = ("/ping", "/v1/chat/completions", "/v1/completions")


def bind(host, port):
    """The API socket, bound and not listening (vLLM's create_server_socket, with its options)."""
    family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host or "", port))
    except OSError:
        sock.close()
        raise
    return sock


def display(host, port):
    host = host or "0.0.0.0"
    return "http://%s:%d" % ("[%s]" % host if ":" in host else host, port)


class Collect(object):
    """A response sent whole once every sequence has finished."""

    def __init__(self, handler, request, seqs):
        self.handler = handler
        self.request = request
        self.seqs = seqs
        self.created = int(time.time())
        self.texts = dict((seq.index, {"reasoning": "", "content": ""}) for seq in seqs)
        self.entries = dict((seq.index, []) for seq in seqs)

    def part(self, kind):
        """Where a token's text goes: a reasoning parser splits reasoning off and drops </think>."""
        if not self.request.parsed:
            return "content"
        return None if kind == "think_end" else kind

    def entry(self, seq, text, position):
        count = self.request.logprobs
        return None if count is None else (text, seq.plan.logprob(position), seq.plan.top(position, count))

    def begin(self):
        pass

    def token(self, seq, kind, text, position):
        where = self.part(kind)
        if where:
            self.texts[seq.index][where] += text
        entry = self.entry(seq, text, position)
        if entry:
            self.entries[seq.index].append(entry)

    def finish(self, seq):
        pass

    def logprobs(self, entries, offset):
        if self.request.logprobs is None:
            return None
        if self.request.kind == "chat":
            return {"content": [protocol.chat_logprob(*entry) for entry in entries]}
        return protocol.text_logprobs(entries, offset)

    def end(self):
        request = self.request
        choices = []
        for seq in self.seqs:
            texts = self.texts[seq.index]
            logprobs = self.logprobs(self.entries[seq.index], 0)
            if request.kind == "chat":
                reasoning = texts["reasoning"] or None
                content = texts["content"] if texts["content"] or not request.parsed else None
                message = {"role": "assistant", "content": content, "refusal": None, "annotations": None,
                           "audio": None, "function_call": None, "tool_calls": [], "reasoning_content": reasoning,
                           "reasoning": reasoning}
                choices.append({"index": seq.index, "message": message, "logprobs": logprobs,
                                "finish_reason": seq.finish, "stop_reason": seq.stop_reason})
            else:
                choices.append({"index": seq.index, "text": texts["content"], "logprobs": logprobs,
                                "finish_reason": seq.finish, "stop_reason": seq.stop_reason, "prompt_logprobs": None})
        body = {"id": request.ident, "object": "chat.completion" if request.kind == "chat" else "text_completion",
                "created": self.created, "model": request.config.name, "choices": choices, "usage": self.usage()}
        if request.kind == "chat":
            body.update({"service_tier": None, "system_fingerprint": None, "prompt_logprobs": None})
        body["kv_transfer_params"] = None
        self.handler.send_json(200, body)

    def usage(self):
        prompt = sum(len(ids) for ids in self.request.prompts)
        return protocol.usage(prompt, sum(seq.generated for seq in self.seqs))


class Stream(Collect):
    """Server-sent events, a chunk a token, ``data: [DONE]`` last (chunked transfer, as uvicorn)."""

    def __init__(self, handler, request, seqs):
        Collect.__init__(self, handler, request, seqs)
        self.offsets = dict((seq.index, 0) for seq in seqs)

    def chunk(self, choices, **extra):
        kind = "chat.completion.chunk" if self.request.kind == "chat" else "text_completion"
        body = {"id": self.request.ident, "object": kind, "created": self.created, "model": self.request.config.name,
                "choices": choices}
        body.update(extra)
        self.handler.write_chunk("data: %s\n\n" % json.dumps(body))

    def begin(self):
        self.handler.start_stream()
        if self.request.kind == "chat":
            for seq in self.seqs:
                self.chunk([{"index": seq.index, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}])

    def token(self, seq, kind, text, position):
        where = self.part(kind)
        if not where:
            return
        entry = self.entry(seq, text, position)
        logprobs = self.logprobs([entry], self.offsets[seq.index]) if entry else None
        self.offsets[seq.index] += len(text)
        if self.request.kind == "chat":
            delta = {"content": text} if where == "content" else {"reasoning_content": text, "reasoning": text}
            self.chunk([{"index": seq.index, "delta": delta, "logprobs": logprobs, "finish_reason": None}])
        else:
            self.chunk([{"index": seq.index, "text": text, "logprobs": logprobs, "finish_reason": None,
                         "stop_reason": None}])

    def finish(self, seq):
        if self.request.kind == "chat":
            last = {"index": seq.index, "delta": {}, "logprobs": None, "finish_reason": seq.finish,
                    "stop_reason": seq.stop_reason}
        else:
            last = {"index": seq.index, "text": "", "logprobs": None, "finish_reason": seq.finish,
                    "stop_reason": seq.stop_reason}
        self.chunk([last])

    def end(self):
        if self.request.include_usage:
            self.chunk([], usage=self.usage())
        self.handler.write_chunk("data: [DONE]\n\n")
        self.handler.write_chunk("")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass  # uvicorn's access line is log_request's; nothing else is logged per request

    def log_request(self, code="-", size="-"):
        if self.server.app.access_log:
            phrase = self.responses.get(code, ("",))[0] if isinstance(code, int) else ""
            log.access(self.client_address, self.requestline, int(code), phrase)

    # -- plumbing
    def send_body(self, status, data, content_type):
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status, body):
        self.send_body(status, json.dumps(body).encode("utf-8"), "application/json")

    def start_stream(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def write_chunk(self, text):
        data = text.encode("utf-8")
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def client_gone(self):
        """Has the client closed its end of the connection (it gave up waiting)?"""
        try:
            if not select.select([self.connection], [], [], 0)[0]:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def authorized(self, path):
        keys = self.server.app.config.api_keys
        if not keys or not path.startswith("/v1"):
            return True
        if self.headers.get("Authorization", "") in ["Bearer " + key for key in keys]:
            return True
        self.send_json(401, {"error": "Unauthorized"})
        return False

    # -- routes
    def do_GET(self):  # pylint: disable=invalid-name
        path = self.path.split("?", 1)[0]
        app = self.server.app
        if path not in GET_ROUTES:
            self.send_json(405 if path in POST_ROUTES else 404,
                           {"detail": "Method Not Allowed" if path in POST_ROUTES else "Not Found"})
        elif not self.authorized(path):
            return
        elif path in ("/health", "/ping"):
            self.send_body(200, b"", None)
        elif path == "/version":
            self.send_json(200, {"version": __version__})
        elif path == "/load":
            stats = app.engine.stats
            self.send_json(200, {"server_load": stats.running + stats.waiting})
        elif path == "/metrics":
            text = app.engine.stats.render(app.config.name)
            self.send_body(200, text.encode("utf-8"), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self.send_json(200, protocol.models(app.config, app.created))

    def do_POST(self):  # pylint: disable=invalid-name
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path not in POST_ROUTES:
            self.send_json(405 if path in GET_ROUTES else 404,
                           {"detail": "Method Not Allowed" if path in GET_ROUTES else "Not Found"})
            return
        if not self.authorized(path):
            return
        if path == "/ping":
            self.send_body(200, b"", None)
            return
        try:
            try:
                body = json.loads(raw.decode("utf-8") or "null")
            except ValueError:
                raise protocol.ApiError(400, "the request body is not valid JSON") from None
            self.complete(protocol.parse(body, "chat" if path.endswith("/chat/completions") else "text",
                                         self.server.app.config))
        except protocol.ApiError as exc:
            self.send_json(exc.status, exc.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def complete(self, request):
        budgets = request.budgets()
        seqs = []
        for number, (ids, budget) in enumerate(zip(request.prompts, budgets)):
            for index in range(request.n):
                key = model.seed_key(ids, request.seed, index, request.temperature)
                plan = model.Plan(key, request.thinking, budget, request.min_tokens, request.ignore_eos)
                seqs.append(engine_mod.Sequence(ids, plan, number * request.n + index, request.stop,
                                                request.min_tokens))
        writer = (Stream if request.stream else Collect)(self, request, seqs)
        events = queue.Queue()
        left = threading.Event()

        def gone():
            return left.is_set() or self.client_gone()

        def run(seq):
            try:
                self.server.app.engine.run(seq, lambda kind, text, position: events.put((seq, kind, text, position)),
                                           gone)
            finally:
                events.put((seq, None, None, None))

        for seq in seqs:
            threading.Thread(target=run, args=(seq,), daemon=True).start()
        try:
            writer.begin()
        except OSError:
            left.set()
        running = len(seqs)
        while running:
            seq, kind, text, position = events.get()
            if left.is_set():
                running -= kind is None
                continue
            try:
                if kind is None:
                    running -= 1
                    writer.finish(seq)
                else:
                    writer.token(seq, kind, text, position)
            except OSError:
                left.set()  # the client is gone: the other sequences see it and abort
        if left.is_set():
            self.close_connection = True
            return
        try:
            writer.end()
        except OSError:
            self.close_connection = True


class Server(ThreadingHTTPServer):
    """The HTTP server on vLLM's pre-bound socket; listen() is what opens it to clients."""

    daemon_threads = True
    request_queue_size = 2048  # uvicorn's backlog

    def __init__(self, sock, app):
        socketserver.BaseServer.__init__(self, sock.getsockname()[:2], Handler)  # pylint: disable=non-parent-init-called
        self.socket = sock
        self.server_name, self.server_port = sock.getsockname()[:2]
        self.app = app

    def server_activate(self):
        self.socket.listen(self.request_queue_size)


class App(object):
    def __init__(self, config, engine):
        self.config = config
        self.engine = engine
        self.created = int(time.time())
        self.access_log = not config.args.disable_uvicorn_access_log


def open_api(config, engine, sock):
    """Log what vLLM logs when its API comes up, then listen. Returns the server (the
    caller runs serve_forever)."""
    log.info("api_server.py:1871", "Supported tasks: ['generate']", log.API)
    if config.generation_warning:
        log.warning("model.py:1528", "Default vLLM sampling parameters have been overridden by the model's "
                    "`generation_config.json`: `%s`. If this is not intended, please relaunch vLLM instance with "
                    "`--generation-config vllm`." % config.generation_warning, log.API)
    log.info("api_server.py:1941", "Starting vLLM API server 0 on %s" % display(config.host, config.port), log.API)
    log.info("launcher.py:37", "Available routes are:", log.API)
    for path in GET_ROUTES + POST_ROUTES[1:]:
        methods = "GET" if path in GET_ROUTES else "POST"
        methods = "GET, POST" if path == "/ping" else methods
        log.info("launcher.py:46", "Route: %s, Methods: %s" % (path, methods), log.API)
    server = Server(sock, App(config, engine))
    log.uvicorn("Started server process [%d]" % os.getpid())
    log.uvicorn("Waiting for application startup.")
    log.uvicorn("Application startup complete.")
    # uvicorn runs the app's startup before it listens: the line can come a moment before
    # the port answers, so a deployment must poll /health rather than trust the line.
    server.server_activate()
    return server
