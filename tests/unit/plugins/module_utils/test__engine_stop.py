"""_engine_stop: what engine_stop removes from a `docker ps -a` listing, and how a docker failure reads."""

import json

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _engine_stop as es

LABEL = "dgx_spark.glm53.engine"


def ps_line(cid, name, labels=""):
    """One line of `docker ps -a --no-trunc --format '{{json .}}'` as Docker 20.10+ prints it."""
    return json.dumps({"Command": "\"sleep 600\"", "CreatedAt": "2026-03-02 10:00:00 +0000 UTC", "ID": cid,
                       "Image": "glm53-lab/busybox", "Labels": labels, "LocalVolumes": "0", "Mounts": "",
                       "Names": name, "Networks": "host", "Ports": "", "RunningFor": "2 minutes ago",
                       "Size": "0B", "State": "running", "Status": "Up 2 minutes"})


LISTING = "\n".join([
    ps_line("a" * 64, "glm53-tf-r0"),
    ps_line("b" * 64, "glm53-tf-r0-backup"),
    ps_line("c" * 64, "serve", LABEL + "=vllm,maintainer=me"),
    ps_line("d" * 64, "glm53-vllm-r1"),
    ps_line("e" * 64, "postgres", "com.docker.compose.project=db"),
]) + "\n"


def test_only_the_given_paths_engines_by_label_or_whole_name():
    assert es.to_remove(LISTING, ["vllm"]) == [
        {"name": "serve", "id": "c" * 64, "path": "vllm"},
        {"name": "glm53-vllm-r1", "id": "d" * 64, "path": "vllm"}]
    # The look-alike glm53-tf-r0-backup is nobody's engine.
    assert es.to_remove(LISTING, ["tensorfold"]) == [{"name": "glm53-tf-r0", "id": "a" * 64, "path": "tensorfold"}]
    assert [v["name"] for v in es.to_remove(LISTING, ["tensorfold", "vllm"])] == [
        "glm53-tf-r0", "serve", "glm53-vllm-r1"]
    assert es.to_remove("", ["vllm"]) == []
    assert es.to_remove(ps_line("f" * 64, "postgres") + "\nnot json\n", ["tensorfold", "vllm"]) == []


def test_rm_names_the_full_ids():
    assert es.rm_args(es.to_remove(LISTING, ["vllm"])) == ["rm", "-f", "c" * 64, "d" * 64]


VICTIMS = [{"name": "serve", "id": "c" * 64, "path": "vllm"},
           {"name": "glm53-vllm-r1", "id": "d" * 64, "path": "vllm"}]


@pytest.mark.parametrize("stderr, gone", [
    ("Error: No such container: %s\n" % ("c" * 64), ["c" * 64]),
    ("Error response from daemon: No such container: %s\n\n" % ("d" * 64), ["d" * 64]),
    ("Error: No such container: glm53-vllm-r1\n", ["d" * 64]),
    # Anything else, or nothing at all, is a real failure.
    ("Error: No such container: %s\nError response from daemon: device or resource busy\n" % ("c" * 64), None),
    ("Error response from daemon: could not kill: permission denied\n", None),
    ("", None),
])
def test_gone_before_rm(stderr, gone):
    assert es.gone_before_rm(stderr, VICTIMS) == gone


PS = "docker ps -a --no-trunc --format '{{json .}}'"
DENIED = ('permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: '
          'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.41/containers/json?all=1": dial unix /var/run/docker.sock: '
          'connect: permission denied\n')


def run(rc=1, stderr="", stdout="", timed_out=False, error=None, command=PS):
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "timed_out": timed_out, "command": command,
            "timeout": 60, "error": error}


def test_permission_denied_names_the_node_command_answer_and_the_docker_group():
    msg = es.failure("spark-worker", run(stderr=DENIED), "spark")
    assert msg.startswith("engine_stop on spark-worker: `%s` failed: permission denied while trying" % PS)
    assert "fix: add spark to the docker group on spark-worker (sudo usermod -aG docker spark) and log in again" in msg
    assert msg.endswith("; nothing was removed")


def test_a_daemon_that_is_down_or_wedged():
    down = es.failure("spark-head", run(stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                                               "Is the docker daemon running?\n"), "spark")
    assert "fix: start Docker on spark-head (sudo systemctl start docker)" in down
    wedged = es.failure("spark-head", run(rc=-15, timed_out=True, error="`x` did not finish"), "spark")
    assert "failed: no answer within 60 s (its process group was killed); fix: the Docker daemon on spark-head " \
           "is wedged" in wedged


def test_a_docker_that_cannot_run_at_all_gets_no_socket_fix():
    msg = es.failure("spark-head", run(rc=None, error="cannot run /usr/bin/docker: EACCES (Permission denied)"),
                     "spark")
    assert "failed: cannot run /usr/bin/docker: EACCES (Permission denied); fix: fix what docker says" in msg


def test_a_failed_rm_names_what_it_was_removing():
    msg = es.failure("spark-head", run(stderr="Error response from daemon: device or resource busy\n",
                                       command="docker rm -f cccc"), "spark", removing=VICTIMS)
    assert msg == ("engine_stop on spark-head: `docker rm -f cccc` failed: Error response from daemon: device or "
                   "resource busy; fix: fix what docker says on spark-head, then rerun; it was removing serve (vllm), "
                   "glm53-vllm-r1 (vllm); run `docker ps -a` there to see what is left")
