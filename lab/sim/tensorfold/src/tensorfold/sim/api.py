"""Rank 0's HTTP server (the kit's API, §4 of the kit reference), simulated.

``App`` holds the routes and the OpenAI shapes. The build-specific parts are
hooks a ``tensorfold.cuda.server.App`` overrides: ``request_extras`` (patch 9001's
``logprobs``, 9004's ``tensorfold_stats``), ``logprobs_object`` (the kit answers
``null``) and ``stats_object`` (the kit sends the full ``tensorfold`` object).
"""

import json
import select
import socket
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tensorfold.sim import env, model
from tensorfold.sim.batchcore import Cancelled
from tensorfold.sim.enginecore import EngineFatal, Job

EFFORTS = {"none": None, "minimal": None, "low": "low", "medium": "high", "high": "high", "max": "max",
           "xhigh": "max"}


class ApiError(Exception):
    def __init__(self, status, message, param=None, code=None, kind="invalid_request_error"):
        Exception.__init__(self, message)
        self.status = status
        self.param = param
        self.code = code
        self.kind = kind

    def body(self):
        error = {"message": str(self), "type": self.kind}
        if self.code:
            error["code"] = self.code
        if self.param:
            error["param"] = self.param
        return {"error": error}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class App(object):
    """The routes; one instance serves every connection."""

    def __init__(self, engine, health):
        self.engine = engine
        self.health = health
        self.name = engine.name
        self.context = engine.context
        self.created = int(time.time())
        fields = env.text("GLM53_TF_REASONING_FIELDS", "both").lower()
        self.reasoning_fields = ("reasoning",) if fields == "reasoning" else ("reasoning", "reasoning_content")
        self.effort_field = env.flag("GLM53_TF_EFFORT_FIELD")
        self.default_effort = EFFORTS.get(env.text("GLM53_TF_DEFAULT_EFFORT", "max").lower(), "max") or "max"
        self.vision = env.flag("GLM53_TF_VISION")

    # -- build hooks ----------------------------------------------------------------
    def request_extras(self, job, body, kind):
        """Build-specific request fields (the kit: none; ``logprobs`` is ignored)."""

    def logprobs_object(self, kind, entries, offset):
        """The ``logprobs`` of a choice for these answer tokens (the kit: none)."""
        return None

    def stats_object(self, stats, job):
        """The ``tensorfold`` object of a response (the kit: all of it)."""
        return stats

    # -- GET ----------------------------------------------------------------------
    def models(self):
        return {"object": "list", "data": [{
            "id": self.name, "object": "model", "owned_by": "tensorfold", "created": self.created,
            "root": self.name, "max_model_len": self.context, "context_length": self.context}]}

    # -- request parsing ------------------------------------------------------------
    def sampling(self, body):
        temperature = body.get("temperature", 1.0)
        if temperature is None:
            temperature = 1.0
        if not _is_number(temperature) or temperature < 0 or temperature > 100:
            raise ApiError(400, "temperature must be a number >= 0", "temperature")
        top_p = body.get("top_p")
        if top_p is not None and (not _is_number(top_p) or not 0 < top_p <= 1):
            raise ApiError(400, "top_p must be a number in (0, 1]", "top_p")
        top_k = body.get("top_k")
        if top_k is not None and (not _is_int(top_k) or top_k < -1):
            raise ApiError(400, "top_k must be an integer >= -1", "top_k")
        seed = body.get("seed")
        if seed is not None and not _is_int(seed):
            raise ApiError(400, "seed must be an integer", "seed")
        count = body.get("n")
        if count is not None and count != 1:
            raise ApiError(400, "n must be 1: this server returns one choice a request", "n")
        return int(round(temperature * 1000)), seed

    def thinking(self, body):
        kwargs = body.get("chat_template_kwargs")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ApiError(400, "chat_template_kwargs must be an object or null", "chat_template_kwargs")
        kwargs = kwargs or {}
        thinking, effort = True, self.default_effort
        if self.effort_field and body.get("reasoning_effort") is not None:
            value = str(body["reasoning_effort"]).lower()
            if value not in EFFORTS:
                raise ApiError(400, "reasoning_effort must be one of %s" % ", ".join(sorted(EFFORTS)),
                               "reasoning_effort")
            thinking, effort = EFFORTS[value] is not None, EFFORTS[value] or effort
        if kwargs.get("reasoning_effort") in ("low", "high"):
            effort = kwargs["reasoning_effort"]
        if "enable_thinking" in kwargs:
            thinking = bool(kwargs["enable_thinking"])
        return thinking, effort

    def budget(self, body, prompt, param):
        explicit = body.get("max_completion_tokens", body.get("max_tokens"))
        if explicit is not None:
            if not _is_int(explicit) or explicit < 1:
                raise ApiError(400, "max_tokens must be an integer >= 1", "max_tokens")
            if prompt + explicit > self.context:
                raise ApiError(400, "this request needs a %d-token context (%d prompt + %d max_tokens) but the "
                               "server was started for %d" % (prompt + explicit, prompt, explicit, self.context),
                               param, "context_length_exceeded")
            return explicit, True
        room = self.context - prompt
        if room < 1:
            raise ApiError(400, "this request needs a %d-token context (%d prompt + 1 max_tokens) but the server "
                           "was started for %d" % (prompt + 1, prompt, self.context), param, "context_length_exceeded")
        return min(self.engine.max_tokens, room), False

    def eos_options(self, body, job):
        """vLLM's ``ignore_eos`` and ``min_tokens`` (sim.decoding has their rules)."""
        ignore = body.get("ignore_eos")
        if ignore is not None and not isinstance(ignore, bool):
            raise ApiError(400, "ignore_eos must be true or false", "ignore_eos")
        least = body.get("min_tokens")
        if least is not None and (not _is_int(least) or least < 0):
            raise ApiError(400, "min_tokens must be an integer >= 0", "min_tokens")
        if least is not None and least > job.max_tokens:
            raise ApiError(400, "min_tokens must be less than or equal to max_tokens=%d, got %d"
                           % (job.max_tokens, least), "min_tokens")
        job.ignore_eos, job.min_tokens = bool(ignore), least or 0

    def prompt_ids(self, body, kind):
        if kind == "chat":
            thinking, effort = self.thinking(body)
            try:
                text = model.chat_prompt(body.get("messages"), thinking, vision=self.vision)
            except model.PromptError as exc:
                raise ApiError(400, str(exc), exc.param)
            return model.tokenize(text), thinking, effort
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return model.tokenize(prompt), False, None
        if isinstance(prompt, list) and prompt and all(_is_int(item) and item >= 0 for item in prompt):
            return list(prompt), False, None
        raise ApiError(400, "prompt must be a string or a flat list of token ids", "prompt")

    def check(self, body, kind):
        """A Job for a valid request, else ApiError."""
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        temperature, seed = self.sampling(body)
        ids, thinking, effort = self.prompt_ids(body, kind)
        param = "messages" if kind == "chat" else "prompt"
        max_tokens, explicit = self.budget(body, len(ids), param)
        try:
            self.engine.batcher.check(len(ids), max_tokens)
        except ValueError as exc:
            raise ApiError(400, str(exc), param)
        job = Job(kind, ids, max_tokens, explicit, seed, temperature, thinking, effort)
        stop = body.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        if stop is not None and (not isinstance(stop, list) or not all(isinstance(item, str) for item in stop)):
            raise ApiError(400, "stop must be a string or a list of strings", "stop")
        job.stop = [item for item in (stop or []) if item]
        self.eos_options(body, job)
        try:
            job.knobs = self.engine.knobs_mod.request_knobs(body.get("tf_knobs"))
        except ValueError as exc:
            raise ApiError(400, str(exc), "tf_knobs")
        job.stream = bool(body.get("stream"))
        options = body.get("stream_options") or {}
        job.include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        self.request_extras(job, body, kind)
        return job

    # -- responses ------------------------------------------------------------------
    def usage(self, job):
        return {"prompt_tokens": job.prompt, "completion_tokens": job.completion,
                "total_tokens": job.prompt + job.completion,
                "prompt_tokens_details": {"cached_tokens": job.cached}}

    def reasoning_delta(self, text):
        return dict((field, text) for field in self.reasoning_fields)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tensorfold/0.3.4"
    sys_version = ""

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass  # the real server logs no access lines

    @property
    def app(self):
        return self.server.app

    # -- plumbing
    def send_json(self, status, body, extra=None):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, status, text, content_type):
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def client_gone(self):
        """Has the client closed its end (gave up waiting)?"""
        try:
            readable = select.select([self.connection], [], [], 0)[0]
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw.decode("utf-8") or "null")
        except ValueError:
            raise ApiError(400, "the request body is not valid JSON")

    # -- routes
    def do_GET(self):  # pylint: disable=invalid-name
        path = self.path.split("?", 1)[0]
        if path in ("/v1/models", "/models"):
            self.send_json(200, self.app.models())
        elif path in ("/health", "/v1/health"):
            status, body = self.app.health.status()
            self.send_json(status, body)
        elif path == "/metrics":
            self.send_text(200, self.app.health.metrics(self.app.name), "text/plain; version=0.0.4")
        else:
            self.send_json(404, {"error": "not found"})

    def do_POST(self):  # pylint: disable=invalid-name
        path = self.path.split("?", 1)[0]
        try:
            if path.endswith("/chat/completions"):
                self.complete(self.read_body(), "chat")
            elif path.endswith("/completions"):
                self.complete(self.read_body(), "text")
            elif path in ("/tokenize", "/v1/tokenize"):
                self.tokenize(self.read_body())
            else:
                self.send_json(404, {"error": "not found"})
        except ApiError as exc:
            self.app.health.reject()
            self.send_json(exc.status, exc.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def tokenize(self, body):
        app = self.app
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if body.get("messages") is not None:
            try:
                text = model.chat_prompt(body["messages"], True, vision=app.vision)
            except model.PromptError as exc:
                raise ApiError(400, str(exc), exc.param)
        elif isinstance(body.get("prompt"), str):
            text = body["prompt"]
            if body.get("add_special_tokens", True):
                text = "[gMASK]<sop>" + text
        else:
            raise ApiError(400, "give a string prompt or messages", "prompt")
        ids = model.tokenize(text)
        self.send_json(200, {"count": len(ids), "max_model_len": app.context, "tokens": ids, "token_strs": None})

    def complete(self, body, kind):
        app = self.app
        app.health.check_switch()
        if app.health.mode == "strict" and app.health.fatal is not None:
            raise ApiError(503, "the engine failed and needs a restart: %s" % app.health.fatal,
                           kind="service_unavailable")
        job = app.check(body, kind)
        ident = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]
        stream = Stream(self, job, ident) if job.stream else Collect(self, job, ident)
        app.health.start(job)
        error = None
        try:
            stream.begin()
            app.engine.generate(job, stream.emit, self.client_gone)
        except Cancelled:
            job.finish = "cancelled"
        except (BrokenPipeError, ConnectionResetError):
            job.finish = "cancelled"
        except EngineFatal as exc:
            error = ApiError(503 if app.health.mode == "strict" else 500, str(exc), kind="server_error")
        except ValueError as exc:
            error = ApiError(400, str(exc))
        except Exception as exc:  # pylint: disable=broad-except
            app.health.set_fatal("%s: %s" % (type(exc).__name__, exc))
            error = ApiError(500, str(exc), kind="server_error")
        finally:
            app.health.finish(job, error)
            app.engine.log_request(job, error)
        if job.finish == "cancelled":
            self.close_connection = True
            return
        try:
            if error is not None:
                stream.fail(error)
            else:
                stream.end()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class Collect(object):
    """A non-streamed response: gather the rounds, answer once."""

    def __init__(self, handler, job, ident):
        self.handler = handler
        self.app = handler.app
        self.job = job
        self.ident = ident
        self.reasoning = []
        self.content = []
        self.entries = []

    def begin(self):
        pass

    def emit(self, events):
        for kind, text, entry in events:
            if kind == "reasoning":
                self.reasoning.append(text)
            elif kind == "content":
                self.content.append(text)
                if entry is not None:
                    self.entries.append(entry)

    def fail(self, error):
        self.handler.send_json(error.status, error.body())

    def end(self):
        app, job = self.app, self.job
        logprobs = app.logprobs_object(job.kind, self.entries, 0) if job.logprobs is not None else None
        if job.kind == "chat":
            reasoning = "".join(self.reasoning) if job.thinking else None
            message = {"role": "assistant", "content": "".join(self.content)}
            for field in app.reasoning_fields:
                message[field] = reasoning
            choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": job.finish}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": "".join(self.content), "logprobs": logprobs, "finish_reason": job.finish}
            obj = "text_completion"
        body = {"id": self.ident, "object": obj, "created": int(time.time()), "model": app.name,
                "choices": [choice], "usage": app.usage(job)}
        stats = app.stats_object(app.engine.stats(job), job)
        if stats is not None:
            body["tensorfold"] = stats
        self.handler.send_json(200, body)


class Stream(Collect):
    """A streamed response: SSE ``data:`` lines, ``[DONE]`` last."""

    def __init__(self, handler, job, ident):
        Collect.__init__(self, handler, job, ident)
        self.offset = 0
        self.created = int(time.time())

    def chunk(self, choice, **extra):
        obj = "chat.completion.chunk" if self.job.kind == "chat" else "text_completion"
        body = {"id": self.ident, "object": obj, "created": self.created, "model": self.app.name,
                "choices": [choice] if choice is not None else []}
        body.update(extra)
        self.write(body)

    def write(self, body):
        data = body if isinstance(body, str) else json.dumps(body)
        self.handler.wfile.write(("data: %s\n\n" % data).encode("utf-8"))
        self.handler.wfile.flush()

    def begin(self):
        handler = self.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        if self.job.kind == "chat":
            self.chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                        "finish_reason": None})

    def emit(self, events):
        app, job = self.app, self.job
        reasoning = "".join(text for kind, text, entry in events if kind == "reasoning")
        content = "".join(text for kind, text, entry in events if kind == "content")
        entries = [entry for kind, text, entry in events if kind == "content" and entry is not None]
        if reasoning and job.kind == "chat":
            self.chunk({"index": 0, "delta": app.reasoning_delta(reasoning), "logprobs": None,
                        "finish_reason": None})
        if content:
            logprobs = app.logprobs_object(job.kind, entries, self.offset) if job.logprobs is not None else None
            if job.kind == "chat":
                choice = {"index": 0, "delta": {"content": content}, "logprobs": logprobs, "finish_reason": None}
            else:
                choice = {"index": 0, "text": content, "logprobs": logprobs, "finish_reason": None}
            self.offset += len(content)
            self.chunk(choice)

    def fail(self, error):
        self.write({"error": error.body()["error"]})
        self.write("[DONE]")

    def end(self):
        app, job = self.app, self.job
        if job.kind == "chat":
            choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": job.finish}
        else:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": job.finish}
        extra = {}
        if job.include_usage:
            extra["usage"] = app.usage(job)
        stats = app.stats_object(app.engine.stats(job), job)
        if stats is not None:
            extra["tensorfold"] = stats
        self.chunk(choice, **extra)
        self.write("[DONE]")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's listen backlog is 5: a burst of more concurrent requests could lose a SYN
    # while the accept loop waits for the GIL, and that client would come 1 s late (TCP's retry).
    request_queue_size = 128

    def __init__(self, address, app):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        ThreadingHTTPServer.__init__(self, address, Handler)
        self.app = app


def serve(app_class, engine, health, host, port):
    """Bind rank 0's API; returns the server (the caller runs serve_forever)."""
    return Server((host, port), app_class(engine, health))
