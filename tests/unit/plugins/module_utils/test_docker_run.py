"""A rank's docker_container parameters as ``docker run`` (_docker_run.run_argv), for a start or
heal on the head without Ansible. The spec is the vllm_nvfp4 role's own (_vllm_plan.rank_spec),
so a parameter the role adds that run_argv does not know fails here."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_run import run_argv
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_plan as vp
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.plugin_utils.vllm_fixtures import (
    contract,
    options,
)

ENV = {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
       "A_FIRST": "1"}


def spec(rank=1, env=None, **changes):
    opts = dict(options(master_address="10.10.0.1", master_port=25053), **changes)
    return vp.rank_spec(rank, 2, opts, env=dict(ENV if env is None else env))


def pairs(argv, flag):
    """Every value that follows ``flag`` in ``argv``, in order."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def test_it_starts_detached_by_name():
    argv = run_argv(spec())
    assert argv[:5] == ["docker", "run", "-d", "--name", "glm53-vllm"]


def test_env_is_sorted_and_the_override_replaces_the_gid_index():
    argv = run_argv(spec(), env_override={"NCCL_IB_GID_INDEX": "5"})
    assert pairs(argv, "-e") == ["A_FIRST=1", "NCCL_IB_GID_INDEX=5", "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1",
                                 "NCCL_SOCKET_IFNAME=enp1s0f1np1"]


def test_env_without_override_and_an_added_key():
    assert "NCCL_IB_GID_INDEX=3" in pairs(run_argv(spec()), "-e")
    assert pairs(run_argv(spec(env={}), env_override={"X": "y"}), "-e") == ["X=y"]


def test_the_spec_is_not_changed_by_the_override():
    one = spec()
    run_argv(one, env_override={"NCCL_IB_GID_INDEX": "5"})
    assert one["env"]["NCCL_IB_GID_INDEX"] == "3"


def test_labels():
    argv = run_argv(spec(rank=1))
    assert pairs(argv, "--label") == ["%s=vllm" % vp.LABEL, "%s=1" % vp.RANK_LABEL]


def test_network_ipc_shm_restart_and_stop_timeout():
    argv = run_argv(spec())
    assert pairs(argv, "--network") == ["host"]
    assert pairs(argv, "--ipc") == ["host"]
    assert pairs(argv, "--shm-size") == ["64g"]
    assert pairs(argv, "--restart") == ["no"]
    assert pairs(argv, "--stop-timeout") == ["60"]


def test_ulimits_in_the_clis_form():
    argv = run_argv(spec())
    assert pairs(argv, "--ulimit") == ["memlock=-1:-1", "stack=67108864:67108864"]
    assert pairs(run_argv(spec(ulimits=["nofile:1024"])), "--ulimit") == ["nofile=1024"]


@pytest.mark.parametrize("bad", ["memlock", "memlock:", ":1:1"])
def test_a_malformed_ulimit_raises(bad):
    with pytest.raises(ValueError, match="ulimit"):
        run_argv(dict(spec(), ulimits=[bad]))


def test_capabilities_devices_and_all_gpus():
    argv = run_argv(spec())
    assert pairs(argv, "--cap-add") == ["IPC_LOCK"]
    assert pairs(argv, "--device") == ["/dev/infiniband:/dev/infiniband"]
    assert pairs(argv, "--gpus") == ["all"]


def test_a_gpu_count_and_an_unknown_request():
    two = dict(spec(), device_requests=[{"driver": "nvidia", "count": 2, "capabilities": [["gpu"]]}])
    assert pairs(run_argv(two), "--gpus") == ["2"]
    other = dict(spec(), device_requests=[{"driver": "amd", "count": -1}])
    with pytest.raises(ValueError, match="device request"):
        run_argv(other)


def test_bind_mounts_readonly_where_the_spec_says():
    argv = run_argv(spec())
    assert pairs(argv, "--mount") == [
        "type=bind,source=/home/spark/.cache/huggingface,target=/root/.cache/huggingface,readonly",
        "type=bind,source=/home/spark/.cache/glm53-vllm,target=/cache",
    ]


def test_a_non_bind_mount_raises():
    volume = dict(spec(), mounts=[{"type": "volume", "source": "data", "target": "/data"}])
    with pytest.raises(ValueError, match="only bind mounts"):
        run_argv(volume)


def test_image_then_the_command_list_at_the_end():
    one = spec(rank=1)
    argv = run_argv(one)
    at = argv.index("glm53-sm121:local")
    assert argv[at + 1:] == one["command"]
    assert argv[-1] == "--headless"
    # Every option comes before the image: docker hands what follows it to the entrypoint.
    assert "--name" in argv[:at] and "--mount" in argv[:at] and "--gpus" in argv[:at]


def test_a_command_string_and_numbers():
    assert run_argv(dict(spec(), command="serve"))[-2:] == ["glm53-sm121:local", "serve"]
    assert run_argv(dict(spec(), command=["x", 8000]))[-2:] == ["x", "8000"]
    assert run_argv(dict(spec(), command=[]))[-1] == "glm53-sm121:local"


def test_an_unknown_key_raises_naming_it():
    with pytest.raises(ValueError, match="privileged") as raised:
        run_argv(dict(spec(), privileged=True, volumes=["/a:/b"]))
    assert "privileged, volumes" in str(raised.value)


def test_module_only_parameters_are_known_and_add_nothing():
    one = spec()
    assert {"state", "detach", "pull", "command_handling", "container_default_behavior", "output_logs"} <= set(one)
    argv = run_argv(one)
    assert "never" not in argv and "no_defaults" not in argv and "started" not in argv


def test_every_spec_of_the_roles_cluster_plan_is_one_docker_run_knows():
    plan = vp.cluster_plan(contract(2), options())
    assert plan["errors"] == []
    for node, one in plan["ranks"].items():
        labels = pairs(run_argv(one), "--label")
        assert "%s=%s" % (vp.PLAN_LABEL, plan["plan_hash"]) in labels, node
