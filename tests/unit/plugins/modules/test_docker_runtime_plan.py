"""docker_runtime_plan through real ansible-playbook: it sees whether the play allows
become however the operator said so (-b, the play's become, ansible_become) without
becoming anything, fails with the fix when a piece is missing and become is off, and in
check mode reports the change instead."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PROBE = {
    "user": {"name": "spark", "uid": 1000, "deploy_user": "spark", "exists": True, "groups": ["docker", "spark"],
             "in_docker_group": True, "session_groups": ["docker", "spark"], "session_in_docker_group": True},
    "docker": {"path": "/usr/bin/docker", "service_error": None,
               "service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}},
    "nvidia_ctk": {"path": "/usr/bin/nvidia-ctk"},
    "daemon": {"ran": True, "answered": True, "server_version": "20.10.24", "runtimes": ["io.containerd.runc.v2", "runc"],
               "default_runtime": "runc", "error": None, "error_kind": None, "timed_out": False,
               "command": "docker info", "timeout": 30},
    "daemon_json": {"path": "/etc/docker/daemon.json", "exists": True, "error": None, "config": {},
                    "runtime": {"registered": False, "path": None, "default_runtime": None, "is_default": False,
                                "configured": False, "missing": ["runtimes.nvidia"]}},
    "test_run": {"image": "", "present": False, "ran": False, "ok": False, "rc": None, "stderr": "", "timed_out": False,
                 "command": None, "error": None},
}


def play(tmp_path, *extra, play_become=None):
    playbook = tmp_path / "play.yml"
    the_play = {
        "hosts": "spark-worker", "connection": "local", "gather_facts": False,
        "vars": {"ansible_python_interpreter": sys.executable},
        "tasks": [{"name": "plan", "dgx_spark.glm53.docker_runtime_plan": {"probe": PROBE, "settings": {}},
                   "register": "decided", "ignore_errors": True}],
    }
    if play_become is not None:
        the_play["become"] = play_become
    playbook.write_text(json.dumps([the_play]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "spark-worker,",
                           str(playbook)] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["spark-worker"]


def test_become_off_fails_naming_the_node_and_the_fix(tmp_path):
    result = play(tmp_path)
    assert result["failed"] is True and result["become"] is False
    assert result["msg"].startswith("[docker_runtime.runtime] the nvidia runtime is missing on spark-worker and become "
                                    "is off: configure it")
    assert "or rerun with become" in result["msg"] and result["msg"].endswith("Nothing was changed.")


@pytest.mark.parametrize("extra, play_become", [
    (["-b"], None),
    (["--become"], None),
    (["-e", "ansible_become=true"], None),
    ([], True),
])
def test_every_way_of_allowing_become_is_seen(tmp_path, extra, play_become):
    result = play(tmp_path, *extra, play_become=play_become)
    assert result.get("failed") is not True, result
    assert result["become"] is True and result["configure_runtime"] is True and result["verify"] is True
    assert result["changed"] is False


def test_play_become_false_wins_over_nothing(tmp_path):
    assert play(tmp_path, play_become=False)["failed"] is True


def test_check_mode_reports_the_change(tmp_path):
    result = play(tmp_path, "--check")
    assert result.get("failed") is not True
    assert result["changed"] is True and result["status"] == "changes_due"
    assert "a real run would: register the runtime with nvidia-ctk and restart Docker" in result["msg"]
    assert "and become is off" in result["msg"]
