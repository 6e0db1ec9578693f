"""The simulated vLLM's command line and the checks it makes before starting anything
(lab/sim/vllm/src/vllm/sim/args.py and config.py): the recipe's flags with their types,
argparse's refusals (exit 2), vLLM's own ValueErrors, and what role a node takes."""

import json
import os
import sys

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.vllm_sim import MODEL_LEN, NAME, SRC, make_model, recipe_args

sys.path.insert(0, SRC)

from vllm.sim import args as args_mod, config as config_mod  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(autouse=True)
def no_knobs(monkeypatch):
    for key in list(os.environ):
        if key.startswith(("VLLM_", "GLM53_")):
            monkeypatch.delenv(key)


@pytest.fixture(name="model")
def fixture_model(tmp_path):
    return make_model(tmp_path)


def parse(argv):
    return args_mod.parse_vllm(argv)[0]


def refused(capsys, argv):
    """argparse's exit code and the last line of its message."""
    with pytest.raises(SystemExit) as caught:
        parse(argv)
    return caught.value.code, capsys.readouterr().err.strip().splitlines()[-1]


# --- parsing ----------------------------------------------------------------------------------

def test_the_recipe_command_line_parses_with_its_types(model):
    args = parse(["serve"] + recipe_args(model, 8000, 25053, 1))
    assert (args.model_tag, args.served_model_name, args.host, args.port) == (model, [NAME], "127.0.0.1", 8000)
    assert (args.tensor_parallel_size, args.nnodes, args.node_rank, args.master_port) == (2, 2, 1, 25053)
    assert (args.gpu_memory_utilization, args.max_model_len, args.max_num_seqs) == (0.82, MODEL_LEN, 12)
    assert (args.max_num_batched_tokens, args.block_size, args.kv_cache_dtype) == (8192, 256, "fp8_ds_mla")
    assert args.enforce_eager is True and args.skip_mm_profiling is True and args.headless is True
    assert args.default_chat_template_kwargs == {"enable_thinking": True, "reasoning_effort": "high"}
    assert args.speculative_config == {"method": "mtp", "num_speculative_tokens": 3}
    assert (args.distributed_executor_backend, args.master_addr, args.reasoning_parser) == ("mp", "127.0.0.1", "glm45")
    # The flags the recipe leaves at their defaults, and the experimental profile's, are known too.
    extra = parse(["serve", model, "--quantization", "modelopt_fp4", "--enable-prefix-caching", "--dtype", "auto",
                   "--no-enable-chunked-prefill", "--async-scheduling", "--trust-remote-code", "--load-format", "auto",
                   "--chat-template", "/recipe-chat-template.jinja", "--compilation-config",
                   '{"mode":0,"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[4,8]}'])
    assert extra.compilation_config["cudagraph_mode"] == "FULL_DECODE_ONLY" and extra.enable_chunked_prefill is False


@pytest.mark.parametrize("argv, code, message", [
    (["serve", "/m", "--tensor-parallel-size", "x"], 2,
     "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'"),
    (["serve", "/m", "-tp", "2.5"], 2, "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: '2.5'"),
    (["serve", "/m", "--gpu-memory-utilization", "lots"], 2,
     "vllm serve: error: argument --gpu-memory-utilization: invalid float value: 'lots'"),
    (["serve", "/m", "--max-model-len", "long"], 2,
     "vllm serve: error: argument --max-model-len: invalid human_readable_int_or_auto value: 'long'"),
    (["serve", "/m", "--node-rank", "one"], 2, "vllm serve: error: argument --node-rank/-r: invalid int value: 'one'"),
    (["serve", "/m", "--kv-cache-dtype", "fp4"], 2, "vllm serve: error: argument --kv-cache-dtype: invalid choice: "
     "'fp4' (choose from 'auto', 'bfloat16', 'float16', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'fp8_inc', 'fp8_ds_mla')"),
    (["serve", "/m", "--speculative-config", "{mtp"], 2, "vllm serve: error: argument --speculative-config: "
     "Value {mtp cannot be converted to %s." % json.loads),
    (["serve", "/m", "--master-port"], 2, "vllm serve: error: argument --master-port: expected one argument"),
    # Unknown flags are left over by the subparser and refused by the top-level parser.
    (["serve", "/m", "--foo"], 2, "vllm: error: unrecognized arguments: --foo"),
    (["serve", "/m", "--task", "embed"], 2, "vllm: error: unrecognized arguments: --task embed"),
    # A unique prefix is not taken for the flag (among vLLM's many flags it may not be unique).
    (["serve", "/m", "--tensor-parallel", "2"], 2, "vllm: error: unrecognized arguments: --tensor-parallel 2"),
])
def test_argparse_refuses_as_vllm_does(capsys, argv, code, message):
    assert refused(capsys, argv) == (code, message)


def test_flexible_names_and_the_model_flag(capsys):
    args = parse(["serve", "/m", "--max_model_len", "32k", "--max-num-batched-tokens", "8K", "--tensor_parallel_size=2"])
    assert (args.max_model_len, args.max_num_batched_tokens, args.tensor_parallel_size) == (32000, 8192, 2)
    assert parse(["serve", "/m", "--max-model-len", "auto"]).max_model_len == -1
    # --model moves to the positional place, with vLLM's warning.
    moved = parse(["serve", "-tp", "2", "--model", "/weights", "--port", "8001"])
    assert (moved.model_tag, moved.tensor_parallel_size, moved.port) == ("/weights", 2, 8001)
    assert "you should provide the model as a positional argument" in capsys.readouterr().out
    with pytest.raises(args_mod.ModelArgumentError, match="`model` should be provided as the first positional"):
        parse(["serve", "--served-model-name", "x"])


def test_version_and_the_other_subcommands(capsys):
    with pytest.raises(SystemExit) as caught:
        parse(["--version"])
    assert caught.value.code == 0 and capsys.readouterr().out.strip() == "0.1.dev20051+g487ecf187.sim"
    assert parse(["chat", "anything"]).subparser == "chat"
    assert refused(capsys, ["frobnicate"])[0] == 2


def test_the_api_server_module_has_its_own_prog(capsys):
    args = args_mod.parse_api_server(["--model", "/m", "--port", "9000"], "api_server.py")[0]
    assert (args.model, args.model_tag, args.port) == ("/m", None, 9000)
    with pytest.raises(SystemExit):
        args_mod.parse_api_server(["--foo"], "api_server.py")
    assert capsys.readouterr().err.strip().splitlines()[-1] == "api_server.py: error: unrecognized arguments: --foo"


def test_non_default_args_lists_what_was_given():
    args = parse(["serve", "/m", "--port", "8000", "-tp", "2", "--host", "127.0.0.1"])
    assert args_mod.non_default(args) == {"host": "127.0.0.1", "model_tag": "/m", "tensor_parallel_size": 2}


# --- checks before the start ---------------------------------------------------------------------

def resolve(argv, entry="serve"):
    if entry == "serve":
        return config_mod.resolve(parse(["serve"] + argv), entry)
    return config_mod.resolve(args_mod.parse_api_server(argv, "api_server.py")[0], entry)


@pytest.mark.parametrize("rank, headless, entry, role", [
    (0, False, "serve", "api"),
    (1, True, "serve", "worker"),
    (1, False, "serve", "follower-api"),  # vLLM starts a whole engine there, which fails after the load
    (0, True, "serve", "dp-headless"),  # vLLM takes it for a data-parallel engine: no API, ever
    (1, True, "api_server", "follower-api"),  # the api_server module ignores --headless
    (0, True, "api_server", "api"),
])
def test_the_role_follows_rank_headless_and_entry(model, rank, headless, entry, role):
    argv = [model, "-tp", "2", "--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", str(rank)]
    argv += ["--headless"] if headless else []
    if entry == "api_server":
        argv = ["--model"] + argv
    config = resolve(argv, entry)
    assert config.role == role
    assert (config.world_size, config.local_world, config.first_rank) == (2, 1, rank)


def test_model_directory_and_context(tmp_path, model, monkeypatch):
    with pytest.raises(ValueError, match=r"Invalid repository ID or local directory specified: '/nonexistent'"):
        resolve(["/nonexistent"])
    with pytest.raises(ValueError, match=r"Invalid repository ID or local directory specified: 'Qwen/Qwen3-0.6B'"):
        resolve([])  # vLLM's default model: nothing is downloaded here
    assert resolve([model]).max_model_len == MODEL_LEN  # derived from config.json
    assert resolve([model, "--max-model-len", "65536"]).max_model_len == 65536
    with pytest.raises(ValueError, match=r"User-specified max_model_len \(524288\) is greater than the derived "
                                         r"max_model_len \(max_position_embeddings=262144"):
        resolve([model, "--max-model-len", "524288"])
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    assert resolve([model, "--max-model-len", "524288"]).max_model_len == 524288
    config = resolve([model, "--served-model-name", "a", "b"])
    assert (config.name, config.served_names) == ("a", ["a", "b"])
    with open(os.path.join(model, "generation_config.json"), "w") as handle:
        json.dump({"temperature": 0.6, "top_p": 0.95, "eos_token_id": 1}, handle)
    assert resolve([model]).generation_warning == {"temperature": 0.6, "top_p": 0.95}
    assert resolve([model, "--generation-config", "vllm"]).generation_warning is None


@pytest.mark.parametrize("argv, error, message", [
    (["-tp", "0"], config_mod.ValidationError, "1 validation error for ParallelConfig\ntensor_parallel_size\n  "
     "Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, input_type=int]"),
    (["--node-rank", "-1"], config_mod.ValidationError, "Input should be greater than or equal to 0"),
    (["--gpu-memory-utilization", "1.2"], config_mod.ValidationError, "1 validation error for CacheConfig\n"
     "gpu_memory_utilization\n  Input should be less than or equal to 1"),
    (["--gpu-memory-utilization", "0"], config_mod.ValidationError, "Input should be greater than 0"),
    (["-tp", "2", "--nnodes", "2", "--distributed-executor-backend", "ray"], ValueError,
     "nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher."),
    (["-tp", "2", "--distributed-executor-backend", "ray"], ValueError, "no Ray backend"),
    (["--distributed-executor-backend", "threads"], ValueError, "Unknown distributed executor backend: threads"),
    (["-tp", "2"], ValueError, "World size (2) is larger than the number of available GPUs (1) in this node."),
    (["-tp", "2", "--nnodes", "2", "--node-rank", "2"], ValueError, "node_rank (2) must be in [0, nnodes=2)"),
    (["-tp", "1", "--nnodes", "2", "--distributed-executor-backend", "mp"], ValueError, "would run no worker"),
    (["-tp", "2", "--nnodes", "2", "--node-rank", "1", "--headless", "--api-server-count", "1"], ValueError,
     "--api-server-count=1 cannot be used with --headless"),
])
def test_vllm_refuses_these_before_starting(model, argv, error, message):
    with pytest.raises(error) as caught:
        resolve([model] + argv)
    assert message in str(caught.value)


def test_errors_name_torch_and_pydantic_as_vllm_prints_them():
    assert config_mod.ValidationError.__module__ == "pydantic_core._pydantic_core"
    from vllm.sim import rendezvous  # pylint: disable=import-outside-toplevel
    assert rendezvous.DistStoreError.__module__ == "torch.distributed"


def test_timeout_is_the_lab_knob_or_vllms_flag(model, monkeypatch):
    assert resolve([model]).timeout == 60.0
    monkeypatch.setenv("VLLM_SIM_RENDEZVOUS_TIMEOUT", "1.5")
    assert resolve([model]).timeout == 1.5
    assert resolve([model, "--distributed-timeout-seconds", "7"]).timeout == 7.0


def test_a_knob_that_is_not_a_number_fails_the_start(monkeypatch):
    from vllm.sim import env  # pylint: disable=import-outside-toplevel
    env.validate()
    monkeypatch.setenv("VLLM_SIM_HEARTBEAT_SECONDS", "fast")
    with pytest.raises(env.KnobError, match="VLLM_SIM_HEARTBEAT_SECONDS='fast' is not a number"):
        env.validate()
