"""From the parsed command line to one rank's configuration, with the checks vLLM makes
before it starts anything (each raises the exception type vLLM raises, with its message).

Where real vLLM makes no check but misbehaves later (a --node-rank not below --nnodes,
fewer ranks than nodes) the simulator refuses at once and says so: README.md lists these.
"""

import json
import os

from vllm.sim import env

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
MP_BACKENDS = ("mp", "uni", "external_launcher")
KNOWN_BACKENDS = MP_BACKENDS + ("ray",)


class ValidationError(ValueError):
    """pydantic's error, as vLLM's config dataclasses raise it for a value out of range."""


ValidationError.__module__ = "pydantic_core._pydantic_core"


def out_of_range(config, field, value, bound, kind):
    words = {"ge": ("greater than or equal to", "greater_than_equal"), "gt": ("greater than", "greater_than"),
             "le": ("less than or equal to", "less_than_equal")}[kind]
    return ValidationError("1 validation error for %s\n%s\n  Input should be %s %s [type=%s, input_value=%r, "
                           "input_type=%s]" % (config, field, words[0], bound, words[1], value, type(value).__name__))


class Config(object):
    """Everything a rank needs, resolved once."""

    def __init__(self, args, entry):
        self.args = args
        self.entry = entry  # "serve" (vllm serve) or "api_server" (python -m ...api_server)
        self.model = args.model_tag or args.model
        self.served_names = args.served_model_name or [self.model]
        self.name = self.served_names[0]
        self.architecture = "unknown"
        self.max_model_len = 0
        self.generation_warning = None
        self.tp = args.tensor_parallel_size
        self.pp = args.pipeline_parallel_size
        self.world_size = self.tp * self.pp
        self.nnodes = args.nnodes
        self.node_rank = args.node_rank
        self.local_world = self.world_size // max(self.nnodes, 1)
        self.first_rank = self.node_rank * self.local_world
        self.util = args.gpu_memory_utilization
        self.max_num_seqs = args.max_num_seqs or 1024  # a GB10 reports > 70 GiB: vLLM's larger default
        self.max_num_batched_tokens = args.max_num_batched_tokens or 8192
        self.host = args.host
        self.port = args.port
        keys = list(args.api_key or [])
        self.api_keys = keys or ([env.api_key()] if env.api_key() else [])
        defaults = args.default_chat_template_kwargs or {}
        self.default_thinking = bool(defaults.get("enable_thinking", True)) if isinstance(defaults, dict) else True
        self.role = None

    @property
    def timeout(self):
        """The rendezvous timeout: --distributed-timeout-seconds when given (vLLM passes it to
        torch), else the lab's VLLM_SIM_RENDEZVOUS_TIMEOUT."""
        if self.args.distributed_timeout_seconds:
            return float(self.args.distributed_timeout_seconds)
        return env.rendezvous_timeout()

    def summary(self):
        """The config part of vLLM's "Initializing a V1 LLM engine ... with config:" line."""
        args = self.args
        return ("model=%r, speculative_config=%s, tokenizer=%r, dtype=%s, max_seq_len=%d, tensor_parallel_size=%d, "
                "pipeline_parallel_size=%d, quantization=%s, enforce_eager=%s, kv_cache_dtype=%s, "
                "served_model_name=%s, enable_prefix_caching=%s, max_num_seqs=%d, max_num_batched_tokens=%d"
                % (self.model, json.dumps(args.speculative_config) if args.speculative_config else None,
                   args.tokenizer or self.model, args.dtype, self.max_model_len, self.tp, self.pp, args.quantization,
                   args.enforce_eager, args.kv_cache_dtype, self.name, args.enable_prefix_caching is not False,
                   self.max_num_seqs, self.max_num_batched_tokens))


def invalid_model(model):
    return ValueError("Invalid repository ID or local directory specified: %r.\nPlease verify the following "
                      "requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify a local directory "
                      "that contains a recognized configuration file.\n   - For Hugging Face models: ensure the "
                      "presence of a 'config.json'.\n   - For Mistral models: ensure the presence of a "
                      "'params.json'.\n(simulated vLLM: only a local directory; nothing is downloaded)" % model)


def read_model(config):
    """config.json of the model directory: architecture and the longest context it allows."""
    path = os.path.join(config.model, "config.json")
    if not os.path.isfile(path):
        raise invalid_model(config.model)
    try:
        with open(path) as handle:
            body = json.load(handle)
    except ValueError as exc:
        raise ValueError("%s is not valid JSON: %s" % (path, exc)) from None
    config.architecture = (body.get("architectures") or ["unknown"])[0]
    derived = body.get("max_position_embeddings") or 2048
    wanted = config.args.max_model_len
    if wanted is None or wanted == -1:
        config.max_model_len = int(derived)
    elif wanted > derived and not env.allow_long_max_model_len():
        raise ValueError("User-specified max_model_len (%d) is greater than the derived max_model_len "
                         "(max_position_embeddings=%d or model_max_length=None in model's config.json). To allow "
                         "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_"
                         "MAX_MODEL_LEN must be used with extreme caution." % (wanted, derived))
    else:
        config.max_model_len = int(wanted)
    generation = os.path.join(config.model, "generation_config.json")
    if config.args.generation_config == "auto" and os.path.isfile(generation):
        try:
            with open(generation) as handle:
                found = dict((key, value) for key, value in json.load(handle).items() if key in SAMPLING_KEYS)
        except (ValueError, AttributeError):
            found = {}
        if found:
            config.generation_warning = found


def check_ranges(args):
    """The bounds vLLM's config classes put on the values argparse let through."""
    for field, value, bound, kind in (("tensor_parallel_size", args.tensor_parallel_size, 1, "ge"),
                                      ("pipeline_parallel_size", args.pipeline_parallel_size, 1, "ge"),
                                      ("nnodes", args.nnodes, 1, "ge"), ("node_rank", args.node_rank, 0, "ge")):
        if value < bound:
            raise out_of_range("ParallelConfig", field, value, bound, kind)
    if not 0 < args.gpu_memory_utilization:
        raise out_of_range("CacheConfig", "gpu_memory_utilization", args.gpu_memory_utilization, 0, "gt")
    if args.gpu_memory_utilization > 1:
        raise out_of_range("CacheConfig", "gpu_memory_utilization", args.gpu_memory_utilization, 1, "le")
    if args.max_num_seqs is not None and args.max_num_seqs < 1:
        raise out_of_range("SchedulerConfig", "max_num_seqs", args.max_num_seqs, 1, "ge")


def check_parallel(config):
    args = config.args
    backend = args.distributed_executor_backend
    if backend is not None and backend not in KNOWN_BACKENDS:
        raise ValueError("Unknown distributed executor backend: %s" % backend)
    if config.nnodes > 1 and backend not in (None,) + MP_BACKENDS:
        raise ValueError("nnodes > 1 can only be set when distributed executor backend is mp, uni or "
                         "external_launcher.")
    if backend == "ray":
        raise ValueError("Failed to import Ray: the simulated vLLM has no Ray backend (the recipe runs "
                         "--distributed-executor-backend mp).")
    if backend is None and config.nnodes == 1 and config.world_size > env.gpus_per_node():
        raise ValueError("World size (%d) is larger than the number of available GPUs (%d) in this node. If this "
                         "is intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n- "
                         "multiprocessing, set '--nnodes' appropriately." % (config.world_size, env.gpus_per_node()))
    if config.node_rank >= config.nnodes:
        # Real vLLM takes the rank modulo nnodes and this node then claims another node's ranks.
        raise ValueError("node_rank (%d) must be in [0, nnodes=%d) (simulated vLLM's check: real vLLM does not "
                         "check it and fails later)" % (config.node_rank, config.nnodes))
    if config.local_world < 1:
        raise ValueError("tensor_parallel_size x pipeline_parallel_size (%d) is smaller than nnodes (%d): this "
                         "node would run no worker (simulated vLLM's check)" % (config.world_size, config.nnodes))


def resolve(args, entry):
    """A Config, or the exception vLLM raises for this command line."""
    check_ranges(args)
    if entry == "serve" and args.headless and args.api_server_count:
        raise ValueError("--api-server-count=%d cannot be used with --headless (no API servers are started in "
                         "headless mode)." % args.api_server_count)
    config = Config(args, entry)
    read_model(config)
    check_parallel(config)
    # What this process is. `python -m ...api_server` ignores --headless (only `vllm serve` reads it),
    # so there a node of rank > 0 starts a whole server, as it does under `vllm serve` without it.
    headless = args.headless and entry == "serve"
    if config.node_rank > 0:
        config.role = "worker" if headless else "follower-api"
    else:
        config.role = "dp-headless" if headless else "api"
    return config
