"""The `vllm` console script (simulated): `vllm serve MODEL [options]`, `vllm --version`.

Also `python3 -m vllm.entrypoints.cli.main serve ...`, the module the console script
runs in real vLLM. The other subcommands exist only to be refused by name.
"""

import sys

from vllm.sim import args as args_mod, log, node


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args, parser = args_mod.parse_vllm(argv)
    except args_mod.ModelArgumentError as exc:
        log.exception(exc)
        return 1
    if args.subparser is None:
        parser.print_help()
        return 0
    if args.subparser != "serve":
        sys.stderr.write("vllm %s: not simulated in the Spark lab (only `vllm serve` is)\n" % args.subparser)
        return 1
    return node.main(args, "serve")


if __name__ == "__main__":
    sys.exit(main())
