"""`tensorfold serve`: the placeholder's two ranks.

Rank 0 listens on MASTER:MASTER_PORT, waits for rank 1, then serves HTTP on
--host/--port; rank 1 connects (retrying, as it waits for rank 0's TCP store) and
exits when rank 0 closes the connection. No GPU, no weights: the snapshot only has
to hold a config.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def say(msg: str) -> None:
    print(f"[tensorfold] {msg}", flush=True)


def parse(argv):
    parser = argparse.ArgumentParser(prog="tensorfold")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--tp", type=int, default=1)
    serve.add_argument("--rank", type=int, default=0)
    serve.add_argument("--master", default="127.0.0.1")
    serve.add_argument("--master-port", type=int, default=29551)
    serve.add_argument("--no-update-check", action="store_true")
    serve.add_argument("--drafter")
    serve.add_argument("--context", type=int, default=2051)
    serve.add_argument("--name")
    serve.add_argument("--max-tokens", type=int)
    serve.add_argument("--mtp-drafts")
    serve.add_argument("--no-drafts", action="store_true")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    return parser.parse_args(argv)


def handler(models: dict, started: float):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path in ("/v1/models", "/models"):
                self.reply(200, models)
            elif self.path in ("/health", "/v1/health"):
                self.reply(200, {"ok": True, "mode": "basic", "uptime_s": round(time.time() - started, 1)})
            else:
                self.reply(404, {"error": "not found"})

        def reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # quiet: the kit reads this log
            pass

    return Handler


def rank0(args) -> int:
    store = socket.create_server((args.master, args.master_port), reuse_port=False)
    say(f"rank 0 of {args.tp}: waiting for rank 1 on {args.master}:{args.master_port}")
    peer, addr = store.accept()
    say(f"rank 1 joined from {addr[0]}")
    slots = max(1, int(os.environ.get("GLM53_TF_BATCH") or 1))
    name = args.name or os.path.basename(args.model.rstrip("/"))
    say(f"context: {args.context} tokens a request (max_model_len); {slots} request slot(s); KV pool: placeholder")
    models = {
        "object": "list",
        "data": [{
            "id": name, "object": "model", "owned_by": "tensorfold", "created": int(time.time()),
            "root": name, "max_model_len": args.context, "context_length": args.context,
        }],
    }
    server = ThreadingHTTPServer((args.host, args.port), handler(models, time.time()))
    say(f"serving {name} at http://{args.host}:{args.port}/v1 on CUDA, rank 0 of {args.tp}")
    try:
        server.serve_forever()
    finally:
        peer.close()
    return 0


def rank1(args) -> int:
    deadline = time.time() + 600
    while True:
        try:
            conn = socket.create_connection((args.master, args.master_port), timeout=5)
            break
        except OSError as exc:
            if time.time() > deadline:
                say(f"rank 1: no rank 0 at {args.master}:{args.master_port}: {exc}")
                return 1
            time.sleep(0.5)
    conn.settimeout(None)
    say(f"rank 1 of {args.tp}: joined {args.master}:{args.master_port}")
    conn.recv(1)  # returns when rank 0 goes away
    say("rank 1: rank 0 closed the connection")
    return 1


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        say(f"no config.json in {args.model}")
        return 1
    return rank0(args) if args.rank == 0 else rank1(args)
