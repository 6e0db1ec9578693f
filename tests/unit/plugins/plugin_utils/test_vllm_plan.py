"""The vllm_nvfp4 role's decisions (path vllm): the node count, the recipe's qualified profile
and its opt-out, each rank's environment from the cluster contract (one GID index for every
HCA), the recipe's command line (checked against the lab's vLLM parser and the recipe's own
rank-tp2.sh argv), the docker_container parameters and the plan hash that makes every rank
restart together, and the image decisions."""

import copy
import sys

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _nccl_env
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_env as ve
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_images as vi
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_plan as vp
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_profile as pr
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.plugin_utils.vllm_fixtures import (
    HCAS,
    IMAGE_ID,
    MODEL,
    NAMES,
    NETDEV,
    contract,
    options,
)
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.vllm_sim import SRC, recipe_args

sys.path.insert(0, SRC)

from vllm.sim import args as sim_args  # noqa: E402  pylint: disable=wrong-import-position


def argv_options(**changes):
    return dict(options(master_address="10.10.0.1", master_port=25053), **changes)


# -- the node count ------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [[], ["spark-b"], ["spark-b", "spark-c", "spark-d"]])
def test_one_two_or_four_nodes_are_supported(workers):
    assert vp.node_count_problem("spark-a", workers) is None


def test_three_nodes_are_refused_naming_each():
    assert vp.node_count_problem("spark-a", ["spark-b", "spark-c"]) == (
        "[vllm_nvfp4.nodes] path=vllm runs tensor parallel across every node of the inventory "
        "(--tensor-parallel-size = node count); found 3 nodes (head spark-a, workers spark-b, spark-c), supported: "
        "1, 2 or 4. Fix: list 1, 2 or 4 Sparks in the sparks group (spark_head + spark_workers). No host was changed.")


def test_five_nodes_and_no_head_are_refused():
    assert "found 5 nodes (head a, workers b, c, d, e)" in vp.node_count_problem("a", ["b", "c", "d", "e"])
    assert "found 0 nodes (no head, no workers)" in vp.node_count_problem(None, None)


# -- the profile ---------------------------------------------------------------------------


def var(name):
    return "vllm_nvfp4_" + name


def test_nothing_set_is_the_qualified_profile():
    result = pr.profile_problems({})
    assert result == {"errors": [], "warnings": [], "normalized": dict(pr.QUALIFIED, profile="qualified")}


def test_text_from_extra_vars_counts_as_the_number_it_spells():
    result = pr.profile_problems({var("max_num_seqs"): "12", var("gpu_memory_utilization"): "0.82",
                                  var("mtp_tokens"): " 3 ", var("max_model_len"): "262144",
                                  var("max_num_batched_tokens"): 8192})
    assert result["errors"] == [] and result["warnings"] == []
    normalized = result["normalized"]
    assert (normalized["max_num_seqs"], normalized["mtp_tokens"], normalized["max_model_len"]) == (12, 3, 262144)
    assert [type(normalized[name]).__name__ for name in ("max_num_seqs", "gpu_memory_utilization")] == ["int", "float"]
    assert normalized["gpu_memory_utilization"] == 0.82


def test_a_bool_is_no_number():
    result = pr.profile_problems({var("mtp_tokens"): True})
    assert result["errors"] == [
        "vllm_nvfp4_mtp_tokens: expected a whole number from 0 to 5 (MTP draft tokens per step; 0 turns speculative "
        "decoding off), found bool true; fix: set it to 3 (the qualified value) or another whole number in that range"]
    assert pr.profile_problems({var("gpu_memory_utilization"): False})["errors"] == [
        "vllm_nvfp4_gpu_memory_utilization: expected a number above 0.1 and at most 0.95 (the share of the unified "
        "memory vLLM takes), found bool false; fix: set it to 0.82 (the qualified value)"]


@pytest.mark.parametrize("name, value", [
    ("max_model_len", [262144]), ("max_num_seqs", "twelve"), ("max_num_seqs", "12.5"), ("max_num_seqs", 12.0),
    ("max_num_seqs", None), ("max_num_seqs", ""), ("mtp_tokens", 6), ("mtp_tokens", -1), ("max_model_len", 1023),
    ("max_model_len", 1048577), ("max_num_seqs", 0), ("max_num_seqs", 1025), ("max_num_batched_tokens", 255),
    ("max_num_batched_tokens", "1048577"), ("gpu_memory_utilization", 0.1), ("gpu_memory_utilization", "0.96"),
    ("gpu_memory_utilization", "nan"), ("gpu_memory_utilization", "inf"), ("gpu_memory_utilization", [0.82]),
    ("gpu_memory_utilization", "82%"),
])
def test_wrong_types_and_ranges_are_refused_under_either_profile(name, value):
    for profile in pr.PROFILES:
        errors = pr.profile_problems({var("profile"): profile, var(name): value})["errors"]
        assert len(errors) == 1 and errors[0].startswith(var(name) + ": expected "), errors
        assert ", found %s; fix: set it to " % pr.found(value) in errors[0]


@pytest.mark.parametrize("name, value", [("mtp_tokens", 0), ("mtp_tokens", 5), ("max_model_len", 1024),
                                         ("max_model_len", 1048576), ("max_num_seqs", 1), ("max_num_seqs", 1024),
                                         ("max_num_batched_tokens", 256), ("gpu_memory_utilization", 0.95),
                                         ("gpu_memory_utilization", "0.11")])
def test_the_range_ends_are_allowed_under_experimental(name, value):
    assert pr.profile_problems({var("profile"): "experimental", var(name): value})["errors"] == []


@pytest.mark.parametrize("name, value, expected", [
    ("execution_mode", "Eager", "vllm_nvfp4_execution_mode: expected eager (--enforce-eager, the recipe's) or graph "
                                "(CUDA graphs), found str \"Eager\"; fix: set it to eager"),
    ("reasoning_parser", "", "vllm_nvfp4_reasoning_parser: expected a vLLM reasoning parser name (lowercase letters, "
                             "digits and _), found str \"\"; fix: set it to glm45 (the recipe's)"),
    ("reasoning_parser", "glm-45", None), ("reasoning_parser", "GLM45", None), ("reasoning_parser", 45, None),
    ("profile", "Qualified", "vllm_nvfp4_profile: expected qualified (the recipe's values, the default) or "
                             "experimental (your own values, not qualified), found str \"Qualified\"; fix: set it to "
                             "qualified"),
])
def test_names_are_checked(name, value, expected):
    errors = pr.profile_problems({var(name): value})["errors"]
    assert len(errors) == 1
    if expected:
        assert errors[0] == expected
    else:
        assert errors[0].startswith(var(name) + ": expected a vLLM reasoning parser name")


def test_a_deviation_under_qualified_is_an_error_naming_the_opt_out():
    assert pr.profile_problems({var("max_num_seqs"): 16})["errors"] == [
        "vllm_nvfp4_max_num_seqs is 16, the qualified profile runs 12 (the recipe's launcher refuses anything else). "
        "Fix: set it back to 12, or opt out by name with vllm_nvfp4_profile: experimental"]


def test_every_deviation_under_qualified_is_named():
    values = {var("mtp_tokens"): "0", var("max_model_len"): 131072, var("max_num_seqs"): 12,
              var("max_num_batched_tokens"): 16384, var("gpu_memory_utilization"): "0.85",
              var("execution_mode"): "graph", var("reasoning_parser"): "glm47", var("extra_args"): ["--seed", "7"]}
    errors = pr.profile_problems(values)["errors"]
    assert [error.split(", the qualified")[0] for error in errors] == [
        "vllm_nvfp4_mtp_tokens is 0", "vllm_nvfp4_max_model_len is 131072",
        "vllm_nvfp4_max_num_batched_tokens is 16384",
        "vllm_nvfp4_gpu_memory_utilization is 0.85", "vllm_nvfp4_execution_mode is graph",
        "vllm_nvfp4_reasoning_parser is glm47", "vllm_nvfp4_extra_args is [\"--seed\", \"7\"]"]
    assert errors[-1].endswith("the qualified profile runs [] (the recipe's launcher refuses anything else). Fix: set "
                               "it back to [], or opt out by name with vllm_nvfp4_profile: experimental")


def test_the_qualified_value_spelled_otherwise_is_no_deviation():
    assert pr.profile_problems({var("gpu_memory_utilization"): "0.820", var("max_num_seqs"): "+12"})["errors"] == []


def test_experimental_warns_once_and_per_deviation():
    result = pr.profile_problems({var("profile"): "experimental", var("max_num_seqs"): "16",
                                  var("execution_mode"): "graph", var("mtp_tokens"): 3})
    assert result["errors"] == []
    assert result["warnings"] == [
        "experimental profile: not qualified by the recipe (vllm_nvfp4_profile: experimental); its results on a Spark "
        "are yours to qualify",
        "vllm_nvfp4_max_num_seqs is 16, the qualified profile runs 12",
        "vllm_nvfp4_execution_mode is graph, the qualified profile runs eager"]
    assert result["normalized"]["max_num_seqs"] == 16 and result["normalized"]["profile"] == "experimental"


def test_experimental_with_the_qualified_values_still_says_it_is_not_qualified():
    assert pr.profile_problems({var("profile"): "experimental"})["warnings"] == [
        "experimental profile: not qualified by the recipe (vllm_nvfp4_profile: experimental); its results on a Spark "
        "are yours to qualify"]


def extra_errors(args):
    return pr.profile_problems({var("profile"): "experimental", var("extra_args"): args})["errors"]


def test_extra_args_must_be_a_list_of_strings():
    assert extra_errors("--enable-prefix-caching") == [
        "vllm_nvfp4_extra_args: expected a list of strings (further vllm serve arguments, one word each), found str "
        "\"--enable-prefix-caching\"; fix: give a YAML list, e.g. [\"--enable-prefix-caching\"], or [] for none"]
    assert extra_errors(["--max-log-len", 100]) == [
        "vllm_nvfp4_extra_args[1]: expected a string, found int 100; fix: quote it (\"100\")"]
    assert extra_errors(["--enable-prefix-caching", "--max-log-len", "100", "--", "-1"]) == []
    assert extra_errors(["--port", "9000", None]) == [  # one error each
        "vllm_nvfp4_extra_args: --port is set by the role from glm53_api_port; fix: drop it from vllm_nvfp4_extra_args "
        "and set glm53_api_port",
        "vllm_nvfp4_extra_args[2]: expected a string, found null; fix: drop the empty entry"]


@pytest.mark.parametrize("flag", pr.ROLE_FLAGS + ("--model",))
def test_each_flag_the_role_sets_is_refused_in_extra_args(flag):
    errors = extra_errors([flag, "1"])
    assert len(errors) == 1 and errors[0].startswith("vllm_nvfp4_extra_args: %s is set by the role from " % flag)


@pytest.mark.parametrize("arg, flag", [
    ("--max_num_seqs=16", "--max-num-seqs"), ("--port=9000", "--port"), ("--no-enforce-eager", "--enforce-eager"),
    ("-tp", "--tensor-parallel-size"), ("-tp2", "--tensor-parallel-size"), ("-tp=2", "--tensor-parallel-size"),
    ("-n", "--nnodes"), ("-r1", "--node-rank"), ("--model=/other", "--model"), ("--max-num-seq", "--max-num-seqs"),
    ("--speculative_config", "--speculative-config"), ("--ho", "--host"),
])
def test_every_spelling_of_a_role_flag_counts(arg, flag):
    assert pr.flag_of(arg) == flag


@pytest.mark.parametrize("arg", ["--enable-prefix-caching", "--max", "--h", "--", "-1", "-q", "value", "--seed=1",
                                 "--chat-template", "--model-impl"])
def test_other_arguments_are_no_role_flag(arg):
    assert pr.flag_of(arg) is None


def test_a_refused_flag_names_the_variable_that_sets_it():
    assert extra_errors(["--max_num_seqs=16"]) == [
        "vllm_nvfp4_extra_args: --max-num-seqs (as --max_num_seqs=16) is set by the role from "
        "vllm_nvfp4_max_num_seqs; fix: drop it from vllm_nvfp4_extra_args and set vllm_nvfp4_max_num_seqs"]
    assert extra_errors(["--block-size", "128"]) == [
        "vllm_nvfp4_extra_args: --block-size is set by the role from the recipe (the same for every profile); fix: "
        "drop it from vllm_nvfp4_extra_args"]


def test_role_flags_are_exactly_the_flags_of_the_command_line():
    argv = vp.rank_argv(1, 2, argv_options())
    assert tuple(arg for arg in argv if arg.startswith("--")) == pr.ROLE_FLAGS


# -- the environment -----------------------------------------------------------------------

HEAD_ENV = {
    "VLLM_HOST_IP": "10.10.0.1", "HF_HOME": "/cache/huggingface", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CACHE_ROOT": "/cache/vllm", "TRITON_CACHE_DIR": "/cache/triton",
    "FLASHINFER_WORKSPACE_BASE": "/cache/flashinfer",
    "CUDA_CACHE_PATH": "/cache/cuda", "VLLM_NO_USAGE_STATS": "1", "VLLM_ENGINE_READY_TIMEOUT_S": "3600",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_CUDA_ARCH_LIST": "12.1a",
    "FLASHINFER_CUDA_ARCH_LIST": "12.1a", "FLASHINFER_DISABLE_VERSION_CHECK": "1", "VLLM_USE_BREAKABLE_CUDAGRAPH": "0",
    "NCCL_NET": "IB", "NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3",
    "NCCL_IB_ROCE_VERSION_NUM": "2", "NCCL_IB_ADDR_FAMILY": "AF_INET", "NCCL_SOCKET_IFNAME": NETDEV,
    "GLOO_SOCKET_IFNAME": NETDEV, "TP_SOCKET_IFNAME": NETDEV, "NCCL_NVLS_ENABLE": "0", "NCCL_CROSS_NIC": "0",
    "NCCL_IB_MERGE_NICS": "0", "NCCL_CUMEM_ENABLE": "0", "NCCL_IGNORE_CPU_AFFINITY": "1", "NCCL_DEBUG": "WARN",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}


def test_the_recipes_environment_with_the_contracts_link():
    result = ve.rank_env(contract(), "spark-a", {})
    assert result == {"env": HEAD_ENV, "errors": [], "hcas": HCAS, "gid_index": "3"}
    assert list(result["env"])[:2] == ["VLLM_HOST_IP", "HF_HOME"]  # the recipe's order
    worker = ve.rank_env(contract(), "spark-b", {"nccl_debug": "info"})["env"]
    assert worker == dict(HEAD_ENV, VLLM_HOST_IP="10.10.0.2", NCCL_DEBUG="INFO")


def test_the_recipes_nccl_names_are_all_documented():
    assert _nccl_env.problems([name for name, _value in ve.RECIPE_ENV], "RECIPE_ENV") == []


def test_a_missing_gid_names_node_hca_and_address():
    first = ve.rank_env(contract(gids={"spark-b": {"rocep1s0f1": None, "roceP2p1s0f1": 3}}), "spark-b", {})
    assert first["env"] == {} and first["errors"] == [
        "spark-b: no RoCE v2 GID carries 10.10.0.2 on rocep1s0f1 (NCCL_IB_GID_INDEX needs one on every HCA in "
        "NCCL_IB_HCA); rerun the preflight after the link has its address"]
    second = ve.rank_env(contract(gids={"spark-b": {"rocep1s0f1": 3}}), "spark-b", {})
    assert second["errors"] == [
        "spark-b: no RoCE v2 GID carries 10.10.0.2 on roceP2p1s0f1 (NCCL_IB_GID_INDEX needs one on every HCA in "
        "NCCL_IB_HCA); rerun the preflight after the link has its address, or set vllm_nvfp4_single_hca: true to run "
        "NCCL on rocep1s0f1 only"]


def test_differing_gids_are_refused_unless_single_hca():
    cluster = contract(gids={"spark-a": {"rocep1s0f1": 3, "roceP2p1s0f1": 5}})
    assert ve.rank_env(cluster, "spark-a", {})["errors"] == [
        "spark-a: NCCL_IB_GID_INDEX is one value for every HCA in NCCL_IB_HCA, but the RoCE v2 GID indexes of "
        "10.10.0.1 differ: rocep1s0f1=3 roceP2p1s0f1=5; fix: give both functions the same address layout so their GID "
        "tables agree, or set vllm_nvfp4_single_hca: true to run NCCL on rocep1s0f1 only"]
    single = ve.rank_env(cluster, "spark-a", {"single_hca": "true"})
    assert (single["errors"], single["hcas"], single["gid_index"]) == ([], ["rocep1s0f1"], "3")
    assert single["env"] == dict(HEAD_ENV, NCCL_IB_HCA="rocep1s0f1")


def test_single_hca_still_needs_the_first_hcas_gid():
    cluster = contract(gids={"spark-a": {"rocep1s0f1": None, "roceP2p1s0f1": 5}})
    assert ve.rank_env(cluster, "spark-a", {"single_hca": True})["errors"] == [
        "spark-a: no RoCE v2 GID carries 10.10.0.1 on rocep1s0f1 (NCCL_IB_GID_INDEX needs one on every HCA in "
        "NCCL_IB_HCA); rerun the preflight after the link has its address"]


def test_no_hca_no_node_and_bad_switches_are_refused():
    assert ve.rank_env(contract(hcas=[]), "spark-a", {})["errors"] == [
        "spark-a: the cluster contract lists no RDMA device (hcas) on the link, so NCCL_NET=IB has nothing to run on; "
        "fix: rerun the preflight (playbooks/preflight.yml -e path=vllm) with the CX7 link up"]
    assert ve.rank_env(contract(), "spark-z", {})["errors"] == [
        "spark-z: not in the cluster contract's nodes; fix: rerun the preflight (playbooks/preflight.yml -e path=vllm)"]
    errors = ve.rank_env(contract(), "spark-a", {"nccl_debug": "LOUD", "single_hca": "maybe"})["errors"]
    assert errors == [
        "vllm_nvfp4_nccl_debug: expected one of VERSION, WARN, INFO, TRACE, found str \"LOUD\"; fix: set it to WARN "
        "(the recipe's)",
        "vllm_nvfp4_single_hca: expected true or false, found str \"maybe\"; fix: set it to false (NCCL on every HCA "
        "of the link, the default) or true (the first HCA only)"]


@pytest.mark.parametrize("name", sorted(ve.CONTRACT_ENV))
def test_extra_env_cannot_override_what_the_contract_gives(name):
    errors = ve.rank_env(contract(), "spark-a", {"extra_env": {name: "x"}})["errors"]
    assert errors == ["vllm_nvfp4_extra_env: %s comes from %s and cannot be set here; fix: drop it from "
                      "vllm_nvfp4_extra_env" % (name, ve.CONTRACT_ENV[name])]


def test_extra_env_adds_and_overrides_the_recipes_other_values():
    result = ve.rank_env(contract(), "spark-a", {"extra_env": {"NCCL_CROSS_NIC": 1, "NCCL_PROTO": "Simple",
                                                               "VLLM_LOGGING_LEVEL": "DEBUG"}})
    assert result["errors"] == []
    assert result["env"] == dict(HEAD_ENV, NCCL_CROSS_NIC="1", NCCL_PROTO="Simple", VLLM_LOGGING_LEVEL="DEBUG")


def test_extra_env_names_and_values_are_checked():
    errors = ve.rank_env(contract(), "spark-a", {"extra_env": {"lower": "1", "NCCL_IB_GID_INDX": "3",
                                                               "NCCL_PROTO": True, "TWO": "a\nb"}})["errors"]
    assert errors[0] == ("vllm_nvfp4_extra_env: NCCL_IB_GID_INDX is not an NCCL variable NCCL documents (did you "
                         "mean NCCL_IB_GID_INDEX?); NCCL ignores a name it does not know, so the setting would do "
                         "nothing")
    assert errors[1:] == [
        "vllm_nvfp4_extra_env: NCCL_PROTO must be a string or a number, found bool true; fix: quote it (\"1\" for on, "
        "\"0\" for off)",
        "vllm_nvfp4_extra_env: TWO must be one line, found str \"a\\nb\"; fix: drop the newline",
        "vllm_nvfp4_extra_env: str \"lower\" is not an environment variable name (capitals, digits and _, e.g. "
        "NCCL_PROTO); fix: rename it"]
    assert ve.rank_env(contract(), "spark-a", {"extra_env": ["NCCL_PROTO=Simple"]})["errors"] == [
        "vllm_nvfp4_extra_env: expected a dict of NAME: value, found list [\"NCCL_PROTO=Simple\"]; fix: give a YAML "
        "mapping, or {} for none"]


# -- the command line ----------------------------------------------------------------------


@pytest.mark.parametrize("rank", [0, 1])
def test_two_ranks_run_the_recipes_command_line(rank):
    # recipe_args is rank-tp2.sh's argv, written out by hand for the lab's vLLM tests.
    argv = vp.rank_argv(rank, 2, argv_options(api_port=8123, master_address="127.0.0.1"))
    assert argv == recipe_args(MODEL, 8123, 25053, rank)


def sim_parse(argv):
    return sim_args.parse_vllm(["serve"] + argv)[0]


@pytest.mark.parametrize("nnodes", [1, 2, 4])
def test_every_rank_parses_as_vllm_serve_and_only_followers_are_headless(nnodes):
    for rank in range(nnodes):
        argv = vp.rank_argv(rank, nnodes, argv_options())
        parsed = sim_parse(argv)
        assert (parsed.model_tag, parsed.tensor_parallel_size, parsed.nnodes, parsed.node_rank) == (
            MODEL, nnodes, nnodes, rank)
        assert (parsed.headless, argv.count("--headless")) == ((rank > 0), int(rank > 0))
        assert (parsed.master_addr, parsed.master_port) == ("10.10.0.1", 25053)
        assert parsed.speculative_config == {"method": "mtp", "num_speculative_tokens": 3}
        assert parsed.default_chat_template_kwargs == {"enable_thinking": True, "reasoning_effort": "high"}
        assert (parsed.gpu_memory_utilization, parsed.enforce_eager) == (0.82, True)


def test_graph_mode_and_mtp_off_drop_their_flags():
    argv = vp.rank_argv(0, 2, argv_options(execution_mode="graph", mtp_tokens=0))
    assert "--enforce-eager" not in argv and "--speculative-config" not in argv
    parsed = sim_parse(argv)
    assert (parsed.enforce_eager, parsed.speculative_config) == (False, None)
    five = vp.rank_argv(0, 2, argv_options(mtp_tokens=5))
    assert five[five.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":5}'


def test_numbers_are_written_without_float_noise_and_extra_args_go_last():
    argv = vp.rank_argv(1, 2, argv_options(gpu_memory_utilization=0.1 + 0.7, extra_args=["--seed", "7"]))
    assert argv[argv.index("--gpu-memory-utilization") + 1] == repr(0.1 + 0.7)
    assert argv[-3:] == ["--headless", "--seed", "7"]
    assert vp.rank_argv(0, 1, argv_options(gpu_memory_utilization=0.8))[10] == "0.8"


# -- the plan ------------------------------------------------------------------------------

RANK_FIELDS = ("command", "env", "labels")


def plan(nodes=2, cluster=None, **changes):
    return vp.cluster_plan(cluster or contract(nodes), options(**changes))


def test_a_two_node_plan_gives_each_rank_the_recipes_container():
    result = plan()
    assert (result["errors"], result["warnings"], result["nodes"]) == ([], [], ["spark-a", "spark-b"])
    head = result["ranks"]["spark-a"]
    assert dict((key, value) for key, value in head.items() if key not in RANK_FIELDS) == {
        "name": "glm53-vllm", "image": "glm53-sm121:local", "pull": "never", "command_handling": "correct",
        "network_mode": "host", "ipc_mode": "host", "shm_size": "64g",
        "ulimits": ["memlock:-1:-1", "stack:67108864:67108864"], "capabilities": ["IPC_LOCK"],
        "devices": ["/dev/infiniband:/dev/infiniband"],
        "device_requests": [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}],
        "mounts": [{"type": "bind", "source": "/home/spark/.cache/huggingface", "target": "/root/.cache/huggingface",
                    "read_only": True},
                   {"type": "bind", "source": "/home/spark/.cache/glm53-vllm", "target": "/cache"}],
        "restart_policy": "no", "stop_timeout": 60, "state": "started", "detach": True,
        "container_default_behavior": "no_defaults", "output_logs": False}
    assert head["labels"] == {"dgx_spark.glm53.engine": "vllm", "dgx_spark.glm53.vllm.rank": "0",
                              "dgx_spark.glm53.vllm.plan": result["plan_hash"]}
    assert head["env"] == HEAD_ENV
    assert head["command"] == vp.rank_argv(0, 2, argv_options())


def test_ranks_differ_only_in_their_rank_and_address():
    result = plan(nodes=4)
    specs = [result["ranks"][node] for node in result["nodes"]]
    assert result["nodes"] == list(NAMES)
    rest = [dict((key, value) for key, value in spec.items() if key not in RANK_FIELDS) for spec in specs]
    assert all(other == rest[0] for other in rest)
    for rank, spec in enumerate(specs):
        assert spec["labels"] == dict(specs[0]["labels"], **{"dgx_spark.glm53.vllm.rank": str(rank)})
        assert spec["env"] == dict(HEAD_ENV, VLLM_HOST_IP="10.10.0.%d" % (rank + 1))
        assert spec["command"] == vp.rank_argv(rank, 4, argv_options())
        assert without_rank(spec["command"]) == without_rank(specs[0]["command"])


def without_rank(command):
    """The command without ``--node-rank N`` and ``--headless``."""
    at = command.index("--node-rank")
    return [arg for arg in command[:at] + command[at + 2:] if arg != "--headless"]


def test_the_plan_hash_is_stable_covers_every_rank_and_leaves_its_inputs_alone():
    cluster, opts = contract(), options()
    before = (copy.deepcopy(cluster), copy.deepcopy(opts))
    first, second = vp.cluster_plan(cluster, opts), vp.cluster_plan(cluster, opts)
    assert first == second and len(first["plan_hash"]) == 64 and (cluster, opts) == before
    without = copy.deepcopy(first["ranks"])
    for spec in without.values():
        del spec["labels"][vp.PLAN_LABEL]
    assert vp.plan_hash(without, IMAGE_ID) == first["plan_hash"]


@pytest.mark.parametrize("change", [
    {"image": "glm53-sm121:other"}, {"image_id": "sha256:" + "b" * 64}, {"model": MODEL.replace("0123", "3210")},
    {"served_name": "glm"}, {"api_port": 8001}, {"api_host": "0.0.0.0"}, {"extra_env": {"NCCL_PROTO": "Simple"}},
    {"nccl_debug": "INFO"}, {"shm_size": "32g"}, {"stop_timeout": 30}, {"cache_host": "/srv/cache"},
    {"hf_cache_host": {"spark-a": "/home/spark/.cache/huggingface", "spark-b": "/data/hf"}},
    {"profile": "experimental", "max_num_seqs": 16}, {"profile": "experimental", "extra_args": ["--seed", "7"]},
    {"profile": "experimental", "execution_mode": "graph"}, {"single_hca": True},
])
def test_any_single_change_changes_every_ranks_label(change):
    base = plan()
    changed = plan(**change)
    assert changed["errors"] == [] and changed["plan_hash"] != base["plan_hash"]
    assert [spec["labels"][vp.PLAN_LABEL] for spec in changed["ranks"].values()] == [changed["plan_hash"]] * 2


def test_a_contract_change_on_one_worker_changes_the_plan():
    moved = contract()
    moved["nodes"]["spark-b"]["link_address"] = "10.10.0.9"
    assert plan(cluster=moved)["plan_hash"] != plan()["plan_hash"]
    assert plan(cluster=contract(master_port=25054))["plan_hash"] != plan()["plan_hash"]


def test_text_from_extra_vars_reaches_the_command_line_as_numbers():
    result = plan(max_num_seqs="12", gpu_memory_utilization="0.82", api_port="8000", stop_timeout="60")
    assert result["errors"] == [] and result["plan_hash"] == plan()["plan_hash"]


def test_one_node_serves_alone():
    result = plan(nodes=1)
    assert result["errors"] == [] and result["nodes"] == ["spark-a"]
    command = result["ranks"]["spark-a"]["command"]
    assert (command[command.index("--tensor-parallel-size") + 1], "--headless" in command) == ("1", False)


def test_three_nodes_plan_nothing():
    result = plan(nodes=3)
    assert result["errors"] == [vp.node_count_problem("spark-a", ["spark-b", "spark-c"])]
    assert (result["plan_hash"], result["nodes"], result["ranks"]) == ("", [], {})


def test_an_unusable_contract_plans_nothing():
    broken = contract()
    broken["master_address"] = None
    result = vp.cluster_plan(broken, options())
    assert result["ranks"] == {} and len(result["errors"]) == 1
    assert result["errors"][0].startswith("the cluster contract is unusable (master_address is missing (null), "
                                          "expected the node's IPv4 address on the CX7 link")


def test_a_contract_for_the_other_path_plans_nothing():
    other = contract(master_port=29551)
    other["path"] = "tensorfold"
    assert vp.cluster_plan(other, options())["errors"] == [
        "the cluster contract is unusable (it was written for path tensorfold, not vllm); fix: rerun the preflight "
        "(playbooks/preflight.yml -e path=vllm)"]


def test_profile_errors_and_warnings_reach_the_plan():
    assert plan(max_num_seqs=16)["errors"] == pr.profile_problems({var("max_num_seqs"): 16})["errors"]
    experimental = plan(profile="experimental", max_num_seqs=16)
    assert experimental["errors"] == [] and experimental["warnings"] == pr.profile_problems(
        {var("profile"): "experimental", var("max_num_seqs"): 16})["warnings"]


def test_rank_errors_name_their_node_and_shared_ones_come_once():
    cluster = contract(gids={"spark-b": {"rocep1s0f1": 3, "roceP2p1s0f1": 5}})
    errors = vp.cluster_plan(cluster, options(extra_env={"VLLM_HOST_IP": "1.2.3.4"}))["errors"]
    assert len(errors) == 2
    assert errors[0].startswith("vllm_nvfp4_extra_env: VLLM_HOST_IP comes from each node's link address")
    assert errors[1].startswith("spark-b: NCCL_IB_GID_INDEX is one value for every HCA in NCCL_IB_HCA")


def test_wrong_options_are_named():
    errors = plan(image="", image_id="abc", model="/model", shm_size="64 g", stop_timeout="soon", api_port=80,
                  hf_cache_host={"spark-a": "/hf"}, cache_host="cache")["errors"]
    assert errors == [
        "image: expected a name without spaces, found str \"\"; fix: set vllm_nvfp4_image",
        "image_id: expected sha256:<64 hex digits>, found str \"abc\"; fix: build the image on the head first (this "
        "is its docker image inspect .Id)",
        "model: expected a container path under /root/.cache/huggingface (the HF cache mount), found str \"/model\"; "
        "fix: run the hf_weights role first (its facts give model_path)",
        "shm_size: expected a size such as 64g (a whole number and b, k, m, g, t or p), found str \"64 g\"; fix: set "
        "vllm_nvfp4_shm_size",
        "stop_timeout: expected a whole number of seconds >= 0, found str \"soon\"; fix: set vllm_nvfp4_stop_timeout "
        "(the recipe gives 60)",
        "glm53_api_port: expected a whole number from 1024 to 65535, found int 80 (below 1024: a privileged port); "
        "fix: set glm53_api_port to a whole number from 1024 to 65535, e.g. 8000 (the default)",
        "spark-b: hf_cache_host: expected an absolute host path, found null; fix: run the hf_weights role first (its "
        "facts give each node's hf_cache_dir)",
        "spark-a: cache_host: expected an absolute host path, found str \"cache\"; fix: set vllm_nvfp4_cache_dir to "
        "an absolute path (expand ~ on the node)",
        "spark-b: cache_host: expected an absolute host path, found str \"cache\"; fix: set vllm_nvfp4_cache_dir to "
        "an absolute path (expand ~ on the node)"]


def test_each_node_mounts_its_own_hf_cache():
    result = plan(hf_cache_host={"spark-a": "/home/spark/.cache/huggingface", "spark-b": "/data/hf"})
    assert [spec["mounts"][0]["source"] for spec in result["ranks"].values()] == [
        "/home/spark/.cache/huggingface", "/data/hf"]


# -- what runs against the plan ------------------------------------------------------------


def inspect(plan_label=None, rank=None):
    labels = {"dgx_spark.glm53.engine": "vllm"}
    if plan_label:
        labels[vp.PLAN_LABEL] = plan_label
    if rank is not None:
        labels[vp.RANK_LABEL] = str(rank)
    return {"Id": "c" * 64, "Config": {"Labels": labels}}


def test_ranks_on_this_plan_need_nothing():
    digest = "a" * 64
    assert vp.plan_changes({"spark-a": inspect(digest, 0), "spark-b": [inspect(digest, 1)]}, digest) == []


def test_ranks_from_another_plan_or_not_ours_are_named():
    found = {"spark-a": inspect("b" * 64, 0), "spark-b": None, "spark-c": inspect(None), "spark-d": {}}
    assert vp.plan_changes(found, "a" * 64) == [
        "rank 0 on spark-a: started from plan bbbbbbbbbbbb, this run's is aaaaaaaaaaaa (a flag, the environment, the "
        "image or the checkpoint changed)",
        "rank 2 on spark-c: not started by this role (its container has no dgx_spark.glm53.vllm.plan label)"]


# -- the image -----------------------------------------------------------------------------


def image(inputs="i" * 64, recipe="r" * 40):
    return [{"Id": IMAGE_ID, "RepoTags": ["glm53-sm121:local"],
             "Config": {"Labels": {"dgx_spark.glm53.inputs": inputs, "dgx_spark.glm53.recipe": recipe}}}]


def test_the_image_is_built_when_absent_or_built_from_other_inputs():
    assert vi.image_build_needed([], "i" * 64, "r" * 40) == {"build": True, "reason": "the image is not on the head"}
    assert vi.image_build_needed(None, "i" * 64, "r" * 40)["build"] is True
    assert vi.image_build_needed(image(inputs="j" * 64), "i" * 64, "r" * 40) == {
        "build": True, "reason": "the recipe's container inputs changed (the image's dgx_spark.glm53.inputs is "
                                 "jjjjjjjjjjjj, this run's is iiiiiiiiiiii)"}
    assert vi.image_build_needed(image(recipe=""), "i" * 64, "r" * 40) == {
        "build": True, "reason": "the recipe's commit changed (the image was built from none, this run pins "
                                 "rrrrrrrrrrrr)"}
    assert vi.image_build_needed(image(), "i" * 64, "r" * 40) == {
        "build": False, "reason": "built from this run's inputs (recipe rrrrrrrrrrrr)"}


def test_only_workers_without_the_heads_image_are_shipped_to():
    other = "sha256:" + "b" * 64
    pairs = [["spark-b", IMAGE_ID], ["spark-c", ""], ["spark-d", other]]
    assert vi.image_ship_targets(IMAGE_ID, pairs) == ["spark-c", "spark-d"]
    assert vi.image_ship_targets(IMAGE_ID, dict(pairs)) == ["spark-c", "spark-d"]
    assert vi.image_ship_targets(IMAGE_ID, []) == []


def test_a_differing_image_after_shipping_names_every_node():
    assert vi.image_mismatch({"spark-a": IMAGE_ID, "spark-b": IMAGE_ID}) is None
    assert vi.image_mismatch({"spark-a": IMAGE_ID, "spark-b": "sha256:" + "b" * 64, "spark-c": ""}) == (
        "[vllm_nvfp4.image] glm53-sm121:local differs after shipping: spark-a=sha256:aaaaaaaaaaaa "
        "spark-b=sha256:bbbbbbbbbbbb spark-c=missing; fix: rerun the role to ship the head's image again (docker save "
        "on the head, docker load on each worker); if it still differs, check the workers' free disk space and that "
        "nothing else tags glm53-sm121:local on them")
    assert vi.image_mismatch([["spark-a", ""], ["spark-b", ""]], image="x:y").startswith(
        "[vllm_nvfp4.image] x:y differs after shipping: spark-a=missing spark-b=missing;")
