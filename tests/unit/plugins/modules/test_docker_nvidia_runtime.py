"""docker_nvidia_runtime through real ansible on localhost, with the Spark lab's nvidia-ctk
simulator as the vendor tool (it merges and rewrites the file as the real one does), a
tool that clobbers the file, and one that wedges."""

import json
import os
import stat
import sys
import time

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SIMULATOR = os.path.join(ROOT, "lab", "image", "node", "rootfs", "usr", "local", "bin", "nvidia-ctk")
OPERATOR = {
    "log-driver": "json-file",
    "log-opts": {"max-size": "10m", "max-file": "3"},
    "default-shm-size": "8G",
    "data-root": "/srv/docker",
    "runtimes": {"crun": {"path": "/usr/bin/crun"}},
}


def ansible(args, check=False, diff=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
           "-m", "dgx_spark.glm53.docker_nvidia_runtime", "-a", json.dumps(args)]
    cmd += (["--check"] if check else []) + (["--diff"] if diff else [])
    proc = ansiballz.run(cmd, cwd=ROOT, env=env, timeout=120)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def daemon_json(tmp_path):
    path = tmp_path / "etc-docker" / "daemon.json"
    path.parent.mkdir()
    text = json.dumps(OPERATOR, indent=2) + "\n"
    path.write_text(text)
    path.chmod(0o640)
    return path


def test_merges_keeping_every_operator_key_then_runs_nothing(daemon_json):
    first = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": SIMULATOR})
    assert first["changed"] is True, first
    assert first["command"] == "%s runtime configure --runtime=docker --config=%s" % (SIMULATOR, daemon_json)
    on_disk = json.loads(daemon_json.read_text())
    assert on_disk == dict(OPERATOR, runtimes={"crun": {"path": "/usr/bin/crun"},
                                               "nvidia": {"args": [], "path": "nvidia-container-runtime"}})
    assert stat.S_IMODE(daemon_json.stat().st_mode) == 0o640
    # Configured: a second run does not even look for nvidia-ctk.
    mtime = daemon_json.stat().st_mtime_ns
    second = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": "/nonexistent/nvidia-ctk"})
    assert second["changed"] is False and "command" not in second, second
    assert daemon_json.stat().st_mtime_ns == mtime


def test_set_as_default(daemon_json):
    result = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": SIMULATOR, "set_as_default": True})
    assert result["changed"] and result["runtime"]["is_default"]
    assert json.loads(daemon_json.read_text())["default-runtime"] == "nvidia"


def test_missing_file_is_created(tmp_path):
    path = tmp_path / "daemon.json"
    result = ansible({"daemon_json": str(path), "nvidia_ctk": SIMULATOR})
    assert result["changed"] is True
    assert json.loads(path.read_text()) == {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}


def test_check_mode_predicts_and_changes_nothing(daemon_json):
    before = daemon_json.read_bytes()
    result = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": "/nonexistent/nvidia-ctk"}, check=True, diff=True)
    assert result["changed"] is True
    assert daemon_json.read_bytes() == before
    assert json.loads(result["diff"]["after"])["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert json.loads(result["diff"]["before"]) == OPERATOR


def test_a_tool_that_drops_keys_is_undone(tmp_path, daemon_json):
    before = daemon_json.read_bytes()
    clobber = script(tmp_path, "nvidia-ctk",
                     'for a; do case "$a" in --config=*) f="${a#--config=}";; esac; done\n'
                     'printf \'{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}\' > "$f"\n')
    result = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": clobber})
    assert result["failed"] is True
    assert "removed data-root" in result["msg"] and "removed log-opts" in result["msg"]
    assert "the original %s was put back" % daemon_json in result["msg"]
    assert daemon_json.read_bytes() == before
    assert stat.S_IMODE(daemon_json.stat().st_mode) == 0o640


def test_a_wedged_tool_is_killed_at_the_deadline(tmp_path, daemon_json):
    before = daemon_json.read_bytes()
    wedged = script(tmp_path, "nvidia-ctk", "exec sleep 60\n")
    start = time.monotonic()
    result = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": wedged, "timeout": 2})
    assert time.monotonic() - start < 30
    assert result["failed"] is True
    assert result["msg"] == ("`%s runtime configure --runtime=docker --config=%s` did not finish within 2s (timeout) "
                             "and was killed; %s is as it was." % (wedged, daemon_json, daemon_json))
    assert daemon_json.read_bytes() == before


def test_broken_json_is_left_alone(daemon_json):
    daemon_json.write_text('{"log-opts": {"max-size": "10m"},}\n')
    result = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": SIMULATOR})
    assert result["failed"] is True
    assert "is not valid JSON" in result["msg"] and "nothing was changed" in result["msg"]
    assert daemon_json.read_text() == '{"log-opts": {"max-size": "10m"},}\n'


def test_tool_not_found(daemon_json):
    result = ansible({"daemon_json": str(daemon_json), "nvidia_ctk": "/nonexistent/nvidia-ctk"})
    assert result["failed"] is True
    assert result["msg"].startswith("/nonexistent/nvidia-ctk not found: install the NVIDIA Container Toolkit")
