"""`python3 -m vllm.entrypoints.openai.api_server [model] [options]` (simulated).

vLLM's older entry point: the same options as `vllm serve`, its own parser (whose prog
is the script's name, "api_server.py"), and no use of --headless: a node started this way
always runs an API server and its engine.
"""

import os
import sys

from vllm.sim import args as args_mod, node


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = args_mod.parse_api_server(argv, os.path.basename(sys.argv[0]) or "api_server.py")[0]
    return node.main(args, "api_server")


if __name__ == "__main__":
    sys.exit(main())
