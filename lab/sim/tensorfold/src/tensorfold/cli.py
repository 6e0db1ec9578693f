"""``tensorfold`` command line (simulated): ``tensorfold serve MODEL_PATH ...``.

The kit's entrypoint runs
``tensorfold serve <MODEL_PATH> --tp 2 --rank R --master ADDR --master-port P
--no-update-check [--drafter PATH] [--context N] [--name NAME] [--max-tokens N]
[--mtp-drafts N] [--no-drafts]`` plus ``--host H --port P`` on rank 0 only.
"""

import argparse
import os
import sys
import time

import tensorfold
from tensorfold.sim import env

USAGE_EXIT = 2


def parser():
    top = argparse.ArgumentParser(prog="tensorfold", description="TensorFold (simulated for the Spark lab)")
    top.add_argument("--version", action="version", version="tensorfold %s" % tensorfold.__version__)
    commands = top.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="serve a model, one process a rank")
    serve.add_argument("model_path", metavar="MODEL_PATH")
    serve.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (2)")
    serve.add_argument("--rank", type=int, default=None, help="this rank (default: $RANK)")
    serve.add_argument("--master", default=None, help="rank 0's address (default: $MASTER)")
    serve.add_argument("--master-port", type=int, default=None, help="rendezvous port (default: $MASTER_PORT or 29551)")
    serve.add_argument("--no-update-check", action="store_true")
    serve.add_argument("--drafter", default=None)
    serve.add_argument("--context", type=int, default=None, help="tokens a request (default 2051)")
    serve.add_argument("--name", default=None, help="served model name")
    serve.add_argument("--max-tokens", type=int, default=None, help="default reply budget")
    serve.add_argument("--mtp-drafts", type=int, default=None)
    serve.add_argument("--no-drafts", action="store_true")
    serve.add_argument("--host", default=None, help="rank 0: API address (127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="rank 0: API port (8080)")
    return top


def launch_time():
    value = os.environ.get("GLM53_TF_LAUNCH_T0")
    try:
        return float(value) if value else time.time()
    except ValueError:
        return time.time()


def resolve(args):
    """Fill rank/master/port from the environment like the real one; None on a usage error."""
    if args.rank is None and os.environ.get("RANK", "").isdigit():
        args.rank = int(os.environ["RANK"])
    args.master = args.master or os.environ.get("MASTER") or os.environ.get("MASTER_ADDR")
    if args.master_port is None:
        args.master_port = int(os.environ.get("MASTER_PORT") or 29551)
    if args.tp != 2:
        return "this simulator runs --tp 2 only (got --tp %d)" % args.tp
    if args.rank not in (0, 1):
        return "--rank must be 0 or 1 (or RANK set)"
    if not args.master:
        return "--master (or MASTER) is required with --tp 2"
    if args.rank == 1 and (args.host or args.port):
        return "--host/--port are rank 0's: rank 1 has no HTTP server"
    args.host = args.host or "127.0.0.1"
    args.port = args.port if args.port is not None else 8080
    return None


def serve(args, launched):
    from tensorfold.families.glm5_next.cuda import engine as engine_mod
    engine = engine_mod.Engine(args, launched)
    if not engine.boot():
        return 1
    if args.rank == 1:
        engine.follow()
        return 0
    from tensorfold.cuda import health as health_mod, server as server_mod
    health = health_mod.Health()
    engine.lead(health)
    try:
        httpd = server_mod.serve(engine, health, args.host, args.port)
    except OSError as exc:
        env.log("[tensorfold] cannot serve on %s:%d: %s" % (args.host, args.port, exc))
        return 1
    env.log("[tensorfold] serving %s at http://%s:%d/v1 on CUDA, rank 0 of 2 (tensor parallel over 2 ranks, "
            "%d request slot(s), simulated engine; loaded in %.1fs)"
            % (engine.name, args.host, args.port, engine.slots, engine.loaded_in))
    httpd.serve_forever()
    return 0


def main(argv=None):
    launched = launch_time()
    args = parser().parse_args(argv)
    if args.command != "serve":
        parser().print_help(sys.stderr)
        return USAGE_EXIT
    problem = resolve(args)
    if problem:
        sys.stderr.write("tensorfold serve: %s\n" % problem)
        return USAGE_EXIT
    try:
        return serve(args, launched)
    except KeyboardInterrupt:
        return 130
