"""The `vllm serve` command line, parsed as vLLM's argparse parser parses it.

vLLM builds `vllm` with subcommands; `vllm serve` is a subparser whose prog is
"vllm serve", so a bad value is refused by it (``vllm serve: error: argument
--tensor-parallel-size/-tp: invalid int value: 'x'``) while an unknown flag is refused by
the top-level parser after the subparser left it over (``vllm: error: unrecognized
arguments: --foo``); both exit 2. `python -m vllm.entrypoints.openai.api_server` has a
parser of its own whose prog is the script's name.

Before argparse, vLLM's FlexibleArgumentParser moves ``--model X`` to the positional
place (with a warning) and accepts underscores for dashes in flag names
(``--max_model_len``). Only the flags below are known: the recipe's (its qualified profile,
the experimental knobs, the flags it leaves at their defaults) and the common frontend
ones. Real vLLM knows hundreds more; an unknown one is refused here, so a role cannot pass
in the lab with a flag a Spark would refuse. Abbreviations are refused too (real argparse
accepts a unique prefix, but what is unique among these few flags may be ambiguous among
vLLM's many).
"""

import argparse
import json
import re

from vllm.sim import log

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
USAGE = "vllm serve [model_tag] [options]"
KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
STUB_COMMANDS = (("chat", "complete"), ("bench", "collect-env", "run-batch"))  # before and after serve


def human_readable_int(value):
    """vLLM's integers with a suffix: 1k = 1000, 1K = 1024, 25.6k = 25600."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
        if "." in number:
            raise argparse.ArgumentTypeError("Decimals are not allowed with binary suffixes like %s. Did you mean "
                                             "to use %s%s instead?" % (suffix, number, suffix.lower()))
        return int(number) * 1024 ** ("KMGT".index(suffix) + 1)
    return int(value)


def human_readable_int_or_auto(value):
    """As human_readable_int, and -1 or 'auto' for "derive it from the model"."""
    if value.strip() == "-1" or value.strip().lower() == "auto":
        return -1
    return human_readable_int(value)


def json_object(value):
    """A JSON argument (vLLM parses these config flags with json.loads)."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError("Value %s cannot be converted to %s." % (value, json.loads)) from None


def boolean(group, *names, **kwargs):
    """vLLM's boolean flags come in pairs: --flag / --no-flag."""
    group.add_argument(*names, action=argparse.BooleanOptionalAction, default=kwargs.pop("default", False), **kwargs)


def add_frontend(parser):
    front = parser.add_argument_group("Frontend")
    front.add_argument("--host", default=None, help="host name (default: every address)")
    front.add_argument("--port", type=int, default=8000)
    front.add_argument("--api-key", nargs="+", default=None)
    front.add_argument("--served-model-name", nargs="+", default=None)
    front.add_argument("--chat-template", default=None)
    front.add_argument("--chat-template-content-format", choices=("auto", "string", "openai"), default="auto")
    front.add_argument("--default-chat-template-kwargs", type=json_object, default=None)
    front.add_argument("--response-role", default="assistant")
    front.add_argument("--enable-auto-tool-choice", action="store_true")
    front.add_argument("--tool-call-parser", default=None)
    front.add_argument("--tool-parser-plugin", default="")
    front.add_argument("--uvicorn-log-level", choices=("debug", "info", "warning", "error", "critical", "trace"),
                       default="info")
    front.add_argument("--disable-uvicorn-access-log", action="store_true")
    front.add_argument("--disable-log-stats", action="store_true")
    boolean(front, "--enable-log-requests")
    boolean(front, "--disable-log-requests", default=True)
    front.add_argument("--headless", action="store_true")
    front.add_argument("--api-server-count", "-asc", type=int, default=None)
    front.add_argument("--root-path", default=None)


def add_model(parser):
    model = parser.add_argument_group("ModelConfig")
    model.add_argument("--model", default=DEFAULT_MODEL)
    model.add_argument("--tokenizer", default=None)
    model.add_argument("--revision", default=None)
    boolean(model, "--trust-remote-code")
    model.add_argument("--dtype", choices=DTYPES, default="auto")
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--max-model-len", type=human_readable_int_or_auto, default=None)
    model.add_argument("--quantization", "-q", default=None)
    boolean(model, "--enforce-eager")
    model.add_argument("--max-logprobs", type=int, default=20)
    model.add_argument("--generation-config", default="auto")
    model.add_argument("--override-generation-config", type=json_object, default=None)
    boolean(model, "--skip-mm-profiling")
    model.add_argument("--reasoning-parser", default="")
    model.add_argument("--load-format", default="auto")
    model.add_argument("--download-dir", default=None)
    model.add_argument("--attention-backend", default=None)
    model.add_argument("--moe-backend", default="auto")
    model.add_argument("--compilation-config", "-cc", type=json_object, default=None)
    model.add_argument("--speculative-config", type=json_object, default=None)
    model.add_argument("--limit-mm-per-prompt", type=json_object, default=None)


def add_engine(parser):
    cache = parser.add_argument_group("CacheConfig")
    cache.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    cache.add_argument("--kv-cache-dtype", choices=KV_DTYPES, default="auto")
    cache.add_argument("--block-size", type=int, default=None)
    cache.add_argument("--swap-space", type=float, default=4)
    boolean(cache, "--enable-prefix-caching", default=None)
    sched = parser.add_argument_group("SchedulerConfig")
    sched.add_argument("--max-num-seqs", type=int, default=None)
    sched.add_argument("--max-num-batched-tokens", type=human_readable_int, default=None)
    boolean(sched, "--enable-chunked-prefill", default=None)
    boolean(sched, "--async-scheduling", default=None)
    par = parser.add_argument_group("ParallelConfig")
    par.add_argument("--distributed-executor-backend", default=None)
    par.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    par.add_argument("--master-addr", default="127.0.0.1")
    par.add_argument("--master-port", type=int, default=29501)
    par.add_argument("--nnodes", "-n", type=int, default=1)
    par.add_argument("--node-rank", "-r", type=int, default=0)
    par.add_argument("--distributed-timeout-seconds", type=int, default=None)
    par.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    par.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    boolean(par, "--enable-expert-parallel", "-ep")
    par.add_argument("--disable-custom-all-reduce", action="store_true")


def add_serve_arguments(parser):
    parser.add_argument("model_tag", nargs="?", default=None, help="the model to serve (a local directory here)")
    add_frontend(parser)
    add_model(parser)
    add_engine(parser)
    return parser


def vllm_parser():
    from vllm.version import __version__
    top = argparse.ArgumentParser(prog="vllm", description="vLLM CLI (simulated for the Spark lab)",
                                  allow_abbrev=False)
    top.add_argument("-v", "--version", action="version", version=__version__)
    commands = top.add_subparsers(required=False, dest="subparser")
    for name in STUB_COMMANDS[0]:
        commands.add_parser(name, add_help=False, help="not simulated").add_argument("rest", nargs="*")
    add_serve_arguments(commands.add_parser("serve", usage=USAGE, allow_abbrev=False,
                                            help="Launch a local OpenAI-compatible API server"))
    for name in STUB_COMMANDS[1]:
        commands.add_parser(name, add_help=False, help="not simulated").add_argument("rest", nargs="*")
    return top


def api_server_parser(prog):
    return add_serve_arguments(argparse.ArgumentParser(prog=prog, allow_abbrev=False,
                                                       description="vLLM OpenAI-Compatible RESTful API server."))


def dashes(argv):
    """--max_model_len -> --max-model-len (the flag name only, never its value)."""
    out = []
    for arg in argv:
        if arg.startswith("--"):
            name, sep, value = arg.partition("=")
            arg = name.replace("_", "-") + sep + value
        out.append(arg)
    return out


class ModelArgumentError(ValueError):
    """vLLM raises this ValueError itself (a traceback, exit 1), not argparse."""


def model_to_front(argv, error):
    """vLLM's handling of ``vllm serve ... --model X``: X becomes the positional model."""
    for index, arg in enumerate(argv):
        if arg == "--model" or arg.startswith("--model="):
            log.warning("argparse_utils.py:232", "With `vllm serve`, you should provide the model as a positional "
                        "argument or in a config file instead of via the `--model` option. The `--model` option "
                        "will be removed in a future version.")
            if arg == "--model":
                if index + 1 >= len(argv) or argv[index + 1].startswith("-"):
                    error("argument --model: expected one argument")
                return [argv[index + 1]] + argv[:index] + argv[index + 2:]
            return [arg[len("--model="):]] + argv[:index] + argv[index + 1:]
    if argv and argv[0].startswith("-") and any(re.match(r"^--served-model-name(=.+|$)", arg) for arg in argv):
        raise ModelArgumentError("`model` should be provided as the first positional argument when using "
                                 "`vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
    return argv


def parse_vllm(argv):
    """(namespace, parser) of a `vllm ...` command line; argparse exits 2 on a usage error."""
    parser = vllm_parser()
    argv = dashes(list(argv))
    if argv[:1] == ["serve"]:
        argv = ["serve"] + model_to_front(argv[1:], parser.error)
    return parser.parse_args(argv), parser


def parse_api_server(argv, prog):
    parser = api_server_parser(prog)
    return parser.parse_args(dashes(list(argv))), parser


def non_default(args):
    """The options that differ from their defaults, as vLLM's "non-default args" line lists them."""
    defaults = vars(api_server_parser("defaults").parse_args([]))
    return dict((key, value) for key, value in sorted(vars(args).items())
                if key in defaults and value != defaults[key])
