"""_docker_probe: what `docker info`, `systemctl show` and the user database say."""

import grp
import json
import os
import pwd

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _docker_probe as dp

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "docker")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_docker_info_of_a_lab_node_without_the_runtime():
    info = dp.parse_docker_info(0, fixture("docker_info_debian12_runc.json"), "")
    assert info["answered"] is True
    assert info["server_version"].startswith("20.10")
    assert "nvidia" not in info["runtimes"] and "runc" in info["runtimes"]
    assert info["default_runtime"] == "runc"
    assert info["error"] is None


def test_docker_info_with_the_runtime_loaded():
    info = dp.parse_docker_info(0, fixture("docker_info_debian12_nvidia.json"), "")
    assert "nvidia" in info["runtimes"]


@pytest.mark.parametrize("rc, stdout, stderr, kind", [
    (1, "", "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
            "Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.41/info\": dial unix /var/run/docker.sock: connect: permission denied",
     "permission"),
    (1, json.dumps({"ServerErrors": ["Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                                     "Is the docker daemon running?"], "ServerVersion": ""}), "", "unreachable"),
    (1, "", "error during connect: something else", "other"),
    (0, "not json", "", "other"),
])
def test_docker_info_errors_are_classified(rc, stdout, stderr, kind):
    info = dp.parse_docker_info(rc, stdout, stderr)
    assert info["answered"] is False
    assert info["error_kind"] == kind
    assert info["error"]


def test_server_errors_win_over_a_zero_exit():
    text = json.dumps({"ServerVersion": "28.5.2", "ServerErrors": ["Cannot connect to the Docker daemon"]})
    assert dp.parse_docker_info(0, text, "")["error_kind"] == "unreachable"


def test_systemctl_show():
    assert dp.parse_systemctl_show("LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n") == {
        "LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}


def test_groups_of_this_user_match_the_database():
    name = pwd.getpwuid(os.geteuid()).pw_name
    exists, groups = dp.user_groups(name)
    assert exists
    assert grp.getgrgid(pwd.getpwnam(name).pw_gid).gr_name in groups
    assert dp.current_user() == (name, os.geteuid())
    assert grp.getgrgid(os.getegid()).gr_name in dp.session_groups()


def test_unknown_user():
    assert dp.user_groups("no-such-user-glm53") == (False, [])


# A running engine container as the GPU's proof (docker_runtime_info runs no test container then).
RANK = json.loads(fixture("container_inspect_lab_vllm_rank.json"))  # the lab's vLLM rank 0, trimmed
RANK_STARTED = 1796406803.620838138  # its State.StartedAt, 2026-12-04T17:53:23.620838138Z


def rank(**changes):
    entry = json.loads(json.dumps(RANK[0]))
    for path, value in changes.items():
        if "__" in path:
            section, key = path.split("__")
            entry[section][key] = value
        else:
            entry[path] = value
    return entry


def test_started_at_reads_dockers_utc_time_and_never_started_is_none_or_long_ago():
    assert dp.started_seconds("2026-12-04T17:53:23.620838138Z") == pytest.approx(RANK_STARTED)
    assert dp.started_seconds("2026-12-04T17:53:23Z") == 1796406803
    assert dp.started_seconds("0001-01-01T00:00:00Z") < 0
    assert dp.started_seconds("") is None and dp.started_seconds("2026-12-04 17:53:23") is None


def test_the_daemons_start_is_its_active_enter_time_on_the_monotonic_clock():
    service = {"ActiveState": "active", "ActiveEnterTimestampMonotonic": "5000000"}
    # 5 s after boot on the monotonic clock, which now reads 105 s: 100 s ago.
    assert dp.daemon_started(service, now=1796406900.0, monotonic=105.0) == pytest.approx(1796406800.0)
    for bad in ({"ActiveState": "inactive", "ActiveEnterTimestampMonotonic": "5000000"},
                {"ActiveState": "active", "ActiveEnterTimestampMonotonic": "0"},
                {"ActiveState": "active"}, None):
        assert dp.daemon_started(bad, now=1.0, monotonic=1.0) is None


def test_a_running_gpu_engine_started_after_the_daemon_proves_the_gpu():
    proof = dp.gpu_engine_proof(RANK, RANK_STARTED - 19)
    assert proof == {"name": "glm53-vllm", "path": "vllm", "image": "glm53-sm121:local",
                     "started": "2026-12-04T17:53:23.620838138Z"}
    # A TensorFold rank is known by its name alone (the kit sets no label).
    tf = rank(Name="/glm53-tf-r1", Config__Labels={})
    assert dp.gpu_engine_proof([tf], RANK_STARTED - 19)["path"] == "tensorfold"


@pytest.mark.parametrize("entry, since", [
    (rank(), RANK_STARTED + 1),                                    # older than the daemon (live restore)
    (rank(), None),                                                # the daemon's start is unknown
    (rank(State__Running=False, State__Status="exited"), RANK_STARTED - 19),
    (rank(State__Restarting=True), RANK_STARTED - 19),
    (rank(HostConfig__DeviceRequests=None), RANK_STARTED - 19),   # no --gpus
    (rank(HostConfig__DeviceRequests=[{"Driver": "", "Count": 1, "Capabilities": [["compute"]]}]), RANK_STARTED - 19),
    (rank(Name="/glm53-vllm-backup", Config__Labels={}), RANK_STARTED - 19),  # not ours: names match whole
])
def test_nothing_else_proves_it(entry, since):
    assert dp.gpu_engine_proof([entry], since) is None
