"""Log lines in vLLM's format.

vLLM's logger writes ``LEVEL MM-DD HH:MM:SS [file.py:line] message`` to stdout
(VLLM_LOGGING_STREAM, default ``ext://sys.stdout``); uvicorn writes its own lines
(``INFO:     Application startup complete.``) to stderr and its access log to stdout.
Each vLLM process prefixes everything it prints with ``(Name pid=N) ``: the API server,
the engine core, each worker. The simulator is one process a rank, so it prints each
line under the name of the process that would print it on a Spark, all with its own pid.
"""

import os
import sys
import threading
import time
import traceback

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
LOCK = threading.Lock()

API = "APIServer"
ENGINE = "EngineCore_DP0"


def worker(rank):
    """The worker process name of a global rank (one GPU a node: TP rank = global rank)."""
    return "Worker_TP%d" % rank


def vllm_stream():
    name = os.environ.get("VLLM_LOGGING_STREAM") or "ext://sys.stdout"
    return sys.stderr if name == "ext://sys.stderr" else sys.stdout


def threshold():
    return LEVELS.get((os.environ.get("VLLM_LOGGING_LEVEL") or "INFO").upper(), 20)


def write(stream, text, name=None):
    """Lines to a stream, each with the process prefix, flushed at once (docker logs)."""
    prefix = "(%s pid=%d) " % (name, os.getpid()) if name else ""
    lines = text.rstrip("\n").split("\n")
    with LOCK:
        stream.write("".join(prefix + line + "\n" for line in lines))
        stream.flush()


def line(level, where, message, name=None):
    """One vLLM logger line; `where` is the file:line the real one prints."""
    if LEVELS[level] < threshold():
        return
    stamp = time.strftime("%m-%d %H:%M:%S")
    write(vllm_stream(), "%s %s [%s] %s" % (level, stamp, where, message), name)


def info(where, message, name=None):
    line("INFO", where, message, name)


def warning(where, message, name=None):
    line("WARNING", where, message, name)


def error(where, message, name=None):
    line("ERROR", where, message, name)


def uvicorn(message, name=API):
    """uvicorn's own logger: ``INFO:     message`` on stderr."""
    write(sys.stderr, "INFO:     " + message, name)


def access(client, request_line, status, phrase, name=API):
    """uvicorn's access log line, on stdout."""
    write(sys.stdout, 'INFO:     %s:%d - "%s" %d %s' % (client[0], client[1], request_line, status, phrase), name)


def exception(exc, name=None):
    """The exception's traceback as Python prints it, on stderr. The frames are the
    simulator's own; the last line (type and message) is what real vLLM prints."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    write(sys.stderr, text, name)
