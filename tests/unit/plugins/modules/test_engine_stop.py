"""engine_stop through real ansible-playbook on localhost. The Docker CLI is a stand-in on PATH
that lists the containers of a fixture (as `docker ps -a --no-trunc --format '{{json .}}'`
prints them), records every call, and refuses the socket, is down or wedges on request."""

import json
import os
import pwd
import socket
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ME = pwd.getpwuid(os.geteuid()).pw_name
NODE = socket.gethostname()
LABEL = "dgx_spark.glm53.engine"
PS = "ps -a --no-trunc --format {{json .}}"

DOCKER = r"""#!/bin/sh
# Stand-in docker CLI: $FAKE_DOCKER says how the engine behaves.
echo "$*" >> "$FAKE_DIR/calls"
case "$1" in
  ps)
    case "$FAKE_DOCKER" in
      denied) printf '%s%s\n' 'permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: ' \
                'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.41/containers/json?all=1": dial unix /var/run/docker.sock: connect: permission denied' >&2
              exit 1 ;;
      down) echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2
            exit 1 ;;
      hang) exec sleep 60 ;;
    esac
    exec cat "$FAKE_DIR/ps.jsonl" ;;
  rm)
    [ -n "$FAKE_RM_FAIL" ] && { printf '%s\n' "$FAKE_RM_FAIL" >&2; exit 1; }
    exit 0 ;;
esac
echo "unexpected: docker $*" >&2; exit 2
"""


def ps_line(cid, name, labels=""):
    return json.dumps({"Command": "\"sleep 600\"", "ID": cid, "Image": "glm53-lab/busybox", "Labels": labels,
                       "Names": name, "State": "running", "Status": "Up 2 minutes"})


TF = "a" * 64
BACKUP = "b" * 64
SERVE = "c" * 64
VLLM_R1 = "d" * 64
DB = "e" * 64
MIXED = [ps_line(TF, "glm53-tf-r0"), ps_line(BACKUP, "glm53-tf-r0-backup"), ps_line(SERVE, "serve", LABEL + "=vllm"),
         ps_line(VLLM_R1, "glm53-vllm-r1"), ps_line(DB, "postgres", "com.docker.compose.project=db")]


@pytest.fixture
def fake(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").write_text(DOCKER)
    (bindir / "docker").chmod(0o755)
    (tmp_path / "ps.jsonl").write_text("\n".join(MIXED) + "\n")
    return tmp_path


def calls(fake):
    path = fake / "calls"
    return path.read_text().splitlines() if path.exists() else []


def stop(fake, args, docker="", rm_fail="", check=False):
    playbook = fake / "play.yml"
    task = {"name": "stop", "dgx_spark.glm53.engine_stop": args,
            "environment": {"PATH": str(fake / "bin") + ":/usr/bin:/bin", "FAKE_DOCKER": docker,
                            "FAKE_DIR": str(fake), "FAKE_RM_FAIL": rm_fail}}
    if check:
        task["check_mode"] = True
    playbook.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "tasks": [task]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_removes_the_given_paths_engines_and_nothing_else(fake):
    result = stop(fake, {"paths": ["vllm"]})
    assert result["changed"] is True
    assert result["removed"] == [{"name": "serve", "id": SERVE, "path": "vllm"},
                                 {"name": "glm53-vllm-r1", "id": VLLM_R1, "path": "vllm"}]
    # Listed once with -a (an exited engine still holds its name), removed by full id in one call.
    assert calls(fake) == [PS, "rm -f %s %s" % (SERVE, VLLM_R1)]


def test_nothing_to_remove_is_no_change_and_no_rm(fake):
    (fake / "ps.jsonl").write_text("\n".join([MIXED[0], MIXED[1], MIXED[4]]) + "\n")
    result = stop(fake, {"paths": ["vllm"]})
    assert (result["changed"], result["removed"]) == (False, [])
    assert calls(fake) == [PS]


def test_check_mode_reports_what_it_would_remove_and_removes_nothing(fake):
    result = stop(fake, {"paths": ["tensorfold", "vllm"]}, check=True)
    assert result["changed"] is True
    assert [(r["name"], r["path"]) for r in result["removed"]] == [
        ("glm53-tf-r0", "tensorfold"), ("serve", "vllm"), ("glm53-vllm-r1", "vllm")]
    assert calls(fake) == [PS]


def test_permission_denied_on_the_socket_fails_naming_the_node_and_the_docker_group(fake):
    result = stop(fake, {"paths": ["vllm"]}, docker="denied")
    assert result["failed"] is True and result["removed"] == []
    msg = result["msg"]
    assert msg.startswith("engine_stop on %s: `docker ps -a --no-trunc --format '{{json .}}'` failed: permission "
                          "denied while trying to connect to the Docker daemon socket" % NODE)
    assert "fix: add %s to the docker group on %s (sudo usermod -aG docker %s) and log in again" % (ME, NODE, ME) in msg
    assert msg.endswith("nothing was removed")
    assert calls(fake) == [PS]


def test_a_daemon_that_is_down_or_wedged_fails_with_its_fix(fake):
    down = stop(fake, {"paths": ["vllm"]}, docker="down")
    assert down["failed"] is True
    assert "Is the docker daemon running?; fix: start Docker on %s (sudo systemctl start docker)" % NODE in down["msg"]
    wedged = stop(fake, {"paths": ["vllm"], "timeout": 1}, docker="hang")
    assert wedged["failed"] is True
    assert "failed: no answer within 1 s (its process group was killed); fix: the Docker daemon on %s is wedged" \
        % NODE in wedged["msg"]


def test_a_container_gone_before_rm_is_not_reported_and_a_real_rm_failure_fails(fake):
    gone = stop(fake, {"paths": ["vllm"]}, rm_fail="Error: No such container: %s" % SERVE)
    assert gone["changed"] is True and [r["name"] for r in gone["removed"]] == ["glm53-vllm-r1"]
    busy = stop(fake, {"paths": ["vllm"]}, rm_fail="Error response from daemon: device or resource busy")
    assert busy["failed"] is True
    assert busy["msg"].startswith("engine_stop on %s: `docker rm -f %s %s` failed: Error response from daemon: "
                                  "device or resource busy" % (NODE, SERVE, VLLM_R1))
    assert busy["msg"].endswith("it was removing serve (vllm), glm53-vllm-r1 (vllm); run `docker ps -a` there to "
                                "see what is left")


@pytest.mark.parametrize("args, wanted", [
    ({"paths": []}, "engine_stop: paths is empty; name the paths whose engines to stop (tensorfold, vllm)"),
    ({"paths": ["sglang"]}, "value of paths must be one or more of: tensorfold, vllm"),
    ({"paths": ["vllm"], "timeout": 0}, "engine_stop: timeout must be 1 to 600 seconds, found 0"),
])
def test_bad_arguments_fail_before_docker_is_asked(fake, args, wanted):
    result = stop(fake, args)
    assert result["failed"] is True and wanted in result["msg"]
    assert calls(fake) == []
