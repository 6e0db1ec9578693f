"""docker_runtime_info through real ansible-playbook on localhost. The Docker CLI and
systemctl are stand-ins on PATH that print what the lab's Debian 12 node printed
(fixtures/docker, captured with `docker info --format '{{json .}}'`), or wedge, or refuse
the socket; the user database, daemon.json and the deadlines are real."""

import grp
import json
import os
import pwd
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "docker")
ME = pwd.getpwuid(os.geteuid()).pw_name

DOCKER = r"""#!/bin/sh
# Stand-in docker CLI: $FAKE_DOCKER says how the engine behaves.
case "$1 $2" in
  "info --format")
    case "$FAKE_DOCKER" in
      hang) exec sleep 60 ;;
      denied) printf '%s%s\n' 'permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: ' \
                'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.41/info": dial unix /var/run/docker.sock: connect: permission denied' >&2
              exit 1 ;;
      down) cat "$FAKE_DIR/docker_info_down.json"; exit 1 ;;
      *) exec cat "$FAKE_DIR/$FAKE_DOCKER.json" ;;
    esac ;;
  "image inspect")
    [ "$5" = glm53-lab/busybox:latest ] && echo sha256:0123 && exit 0
    echo "Error: No such image: $5" >&2; exit 1 ;;
  "run --rm")
    echo "$@" > "$FAKE_DIR/run-args"
    [ -n "$FAKE_RUN_FAIL" ] && { echo "$FAKE_RUN_FAIL" >&2; exit 125; }
    exit 0 ;;
esac
echo "unexpected: docker $*" >&2; exit 2
"""
SYSTEMCTL = """#!/bin/sh
printf 'LoadState=loaded\\nActiveState=active\\nUnitFileState=enabled\\n'
"""


@pytest.fixture
def fakes(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in (("docker", DOCKER), ("systemctl", SYSTEMCTL), ("nvidia-ctk", "#!/bin/sh\nexit 0\n")):
        (bindir / name).write_text(body)
        (bindir / name).chmod(0o755)
    for name in os.listdir(FIXTURES):
        (tmp_path / name).write_bytes(open(os.path.join(FIXTURES, name), "rb").read())
    return tmp_path


def probe(fakes, args, docker="docker_info_debian12_runc", run_fail="", path_extra=True):
    playbook = fakes / "play.yml"
    path = str(fakes / "bin") + (":/usr/bin:/bin" if path_extra else "")
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"name": "probe", "dgx_spark.glm53.docker_runtime_info": args,
                   "environment": {"PATH": path, "FAKE_DOCKER": docker, "FAKE_DIR": str(fakes),
                                   "FAKE_RUN_FAIL": run_fail}}],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_a_node_without_the_runtime(fakes, tmp_path):
    config = tmp_path / "daemon.json"
    config.write_text('{"bip": "198.19.1.1/24", "log-opts": {"max-size": "10m"}}\n')
    result = probe(fakes, {"daemon_json": str(config), "test_image": "glm53-lab/busybox:latest"})
    assert result["changed"] is False
    assert result["docker"]["path"] == str(fakes / "bin" / "docker")
    assert result["docker"]["service"] == {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}
    assert result["nvidia_ctk"]["path"] == str(fakes / "bin" / "nvidia-ctk")
    assert result["daemon"]["answered"] is True and "nvidia" not in result["daemon"]["runtimes"]
    assert result["daemon"]["command"] == "docker info --format '{{json .}}'"
    assert result["daemon_json"]["config"] == {"bip": "198.19.1.1/24", "log-opts": {"max-size": "10m"}}
    assert result["daemon_json"]["runtime"]["missing"] == ["runtimes.nvidia"]
    assert result["test_run"]["ok"] is True and result["test_run"]["source"] == "test_image"
    # The command replaces the entrypoint, so an image's own entrypoint (an engine's) never runs.
    assert (fakes / "run-args").read_text().split() == [
        "run", "--rm", "--gpus", "all", "--network", "none", "--pull", "never", "--entrypoint", "true",
        "glm53-lab/busybox:latest"]


def test_without_a_test_image_the_first_known_image_on_the_node_runs(fakes):
    result = probe(fakes, {"known_images": ["glm53-tensorfold:lp9001", "glm53-lab/busybox:latest"],
                           "test_command": ["nvidia-smi", "-L"]})
    run = result["test_run"]
    assert (run["image"], run["source"], run["ok"]) == ("glm53-lab/busybox:latest", "known_image", True)
    assert run["tried"] == ["glm53-tensorfold:lp9001", "glm53-lab/busybox:latest"]
    assert (fakes / "run-args").read_text().split() == [
        "run", "--rm", "--gpus", "all", "--network", "none", "--pull", "never", "--entrypoint", "nvidia-smi",
        "glm53-lab/busybox:latest", "-L"]


def test_without_a_test_image_and_none_of_the_known_images_no_container_runs(fakes):
    run = probe(fakes, {"known_images": ["glm53-tensorfold:lp9001", "glm53-tensorfold:dev"]})["test_run"]
    assert (run["present"], run["ran"], run["source"], run["image"]) == (False, False, None, None)
    assert run["tried"] == ["glm53-tensorfold:lp9001", "glm53-tensorfold:dev"]
    assert run["error"] == "none of glm53-tensorfold:lp9001, glm53-tensorfold:dev is on this node (none is pulled here)"
    assert not (fakes / "run-args").exists()


def test_the_deploy_users_groups_come_from_the_user_database(fakes):
    result = probe(fakes, {"user": ME})
    expected = sorted(set([grp.getgrgid(pwd.getpwnam(ME).pw_gid).gr_name]
                          + [g.gr_name for g in grp.getgrall() if ME in g.gr_mem]))
    assert result["user"]["name"] == ME and result["user"]["deploy_user"] == ME
    assert result["user"]["groups"] == expected
    assert result["user"]["in_docker_group"] == ("docker" in expected)
    assert probe(fakes, {"user": "no-such-user-glm53"})["user"]["exists"] is False


def test_runtime_loaded(fakes):
    result = probe(fakes, {}, docker="docker_info_debian12_nvidia")
    assert "nvidia" in result["daemon"]["runtimes"]


@pytest.mark.parametrize("mode, kind", [("denied", "permission"), ("down", "unreachable")])
def test_engine_errors_are_reported_not_raised(fakes, mode, kind):
    result = probe(fakes, {"test_image": "glm53-lab/busybox:latest"}, docker=mode)
    assert result.get("failed") is not True
    assert result["daemon"]["answered"] is False and result["daemon"]["error_kind"] == kind
    assert result["test_run"]["ran"] is False


def test_a_wedged_engine_comes_back_at_the_deadline(fakes):
    start = time.monotonic()
    result = probe(fakes, {"timeout": 2, "test_image": "glm53-lab/busybox:latest"}, docker="hang")
    assert time.monotonic() - start < 30
    assert result["daemon"]["timed_out"] is True and result["daemon"]["error_kind"] == "timeout"
    assert result["daemon"]["timeout"] == 2
    assert "did not finish within 2s" in result["daemon"]["error"]
    assert result["test_run"]["ran"] is False


def test_missing_image_and_failed_container(fakes):
    missing = probe(fakes, {"test_image": "ubuntu:24.04"})["test_run"]
    assert missing["present"] is False and missing["ran"] is False
    assert missing["error"] == "image ubuntu:24.04 is not on this node (it is never pulled here)"
    failed = probe(fakes, {"test_image": "glm53-lab/busybox:latest"}, run_fail="could not select device driver")["test_run"]
    assert failed["ran"] is True and failed["ok"] is False and failed["rc"] == 125
    assert failed["stderr"] == "could not select device driver"


def test_no_docker_command(fakes):
    (fakes / "bin" / "docker").unlink()
    result = probe(fakes, {}, path_extra=False)
    assert result["docker"]["path"] is None
    assert result["daemon"]["ran"] is False and result["daemon"]["error"] == "no docker command on PATH"


def test_broken_daemon_json(fakes, tmp_path):
    config = tmp_path / "daemon.json"
    config.write_text('{"bip": }')
    result = probe(fakes, {"daemon_json": str(config)})
    assert result["daemon_json"]["error"].startswith("not valid JSON")
    assert result["daemon_json"]["runtime"] is None
