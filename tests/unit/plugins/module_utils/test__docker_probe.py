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
