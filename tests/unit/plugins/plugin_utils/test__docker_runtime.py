"""The docker_runtime judgment on the controller: what is missing, what the role fixes,
when it must stop (become off, problems no fix solves), and the apt data an install
writes (deb822 sources with Signed-By, pinned versions, the Debian architecture)."""

import copy
import os

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _docker_runtime as dr

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
NODE = "spark-worker"
UBUNTU_ARM = {"distribution": "Ubuntu", "distribution_release": "noble", "distribution_version": "24.04",
              "architecture": "aarch64", "os_family": "Debian"}
DEBIAN_X86 = {"distribution": "Debian", "distribution_release": "bookworm", "distribution_version": "12",
              "architecture": "x86_64", "os_family": "Debian"}
RUNTIMES = ["io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "nvidia", "runc"]


def healthy(**changes):
    """A node where everything works for spark, as docker_runtime_info returns it."""
    probe = {
        "user": {"name": "spark", "uid": 1000, "deploy_user": "spark", "exists": True, "groups": ["docker", "spark"],
                 "in_docker_group": True, "session_groups": ["docker", "spark"], "session_in_docker_group": True},
        "docker": {"path": "/usr/bin/docker", "service_error": None,
                   "service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}},
        "nvidia_ctk": {"path": "/usr/bin/nvidia-ctk"},
        "daemon": {"ran": True, "answered": True, "server_version": "28.5.2", "runtimes": list(RUNTIMES),
                   "default_runtime": "runc", "error": None, "error_kind": None, "timed_out": False,
                   "command": "docker info --format '{{json .}}'", "timeout": 30},
        "daemon_json": {"path": "/etc/docker/daemon.json", "exists": True, "error": None,
                        "config": {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}},
                        "runtime": {"registered": True, "path": "nvidia-container-runtime", "default_runtime": None,
                                    "is_default": False, "configured": True, "missing": []}},
        "test_run": {"image": "ubuntu:24.04", "source": "test_image", "tried": ["ubuntu:24.04"], "present": True,
                     "ran": True, "ok": True, "rc": 0, "stderr": "", "timed_out": False,
                     "command": "docker run --rm --gpus all --network none --pull never --entrypoint true ubuntu:24.04",
                     "error": None},
    }
    for path, value in changes.items():
        section, key = path.split("__")
        probe[section][key] = value
    return probe


def no_runtime(probe):
    probe = copy.deepcopy(probe)
    probe["daemon"]["runtimes"] = [r for r in RUNTIMES if r != "nvidia"]
    probe["daemon_json"]["config"] = {"log-opts": {"max-size": "10m"}}
    probe["daemon_json"]["runtime"] = {"registered": False, "path": None, "default_runtime": None, "is_default": False,
                                       "configured": False, "missing": ["runtimes.nvidia"]}
    return probe


def no_docker(probe):
    probe = no_runtime(probe)
    probe["docker"] = {"path": None, "service": {"LoadState": "not-found", "ActiveState": "inactive",
                                                 "UnitFileState": ""}, "service_error": None}
    probe["daemon"] = {"ran": False, "answered": False, "server_version": None, "runtimes": [], "default_runtime": None,
                       "error": "no docker command on PATH", "error_kind": None, "timed_out": False, "command": None,
                       "timeout": 30}
    probe["test_run"] = {"image": "ubuntu:24.04", "source": None, "tried": [], "present": False, "ran": False, "ok": False,
                         "rc": None, "stderr": "", "timed_out": False, "command": None, "error": None}
    return probe


KNOWN = ["glm53-tensorfold:lp9001", "glm53-tensorfold:dev"]


def known_image_ran(probe, image="glm53-tensorfold:dev", ok=True, stderr=""):
    """docker_runtime_test_image empty: the module found ``image`` among the collection's images and ran it."""
    probe = copy.deepcopy(probe)
    probe["test_run"] = {"image": image, "source": "known_image", "tried": KNOWN[:KNOWN.index(image) + 1],
                         "present": True, "ran": True, "ok": ok, "rc": 0 if ok else 125, "stderr": stderr,
                         "timed_out": False, "error": None,
                         "command": "docker run --rm --gpus all --network none --pull never --entrypoint true " + image}
    return probe


def no_image(probe, tried=tuple(KNOWN)):
    """docker_runtime_test_image empty and none of the collection's images on the node: no container ran."""
    probe = copy.deepcopy(probe)
    probe["test_run"] = {"image": None, "source": None, "tried": list(tried), "present": False, "ran": False,
                         "ok": False, "rc": None, "stderr": "", "timed_out": False, "command": None,
                         "error": "none of %s is on this node (none is pulled here)" % ", ".join(tried) if tried else None}
    return probe


NO_TEST_IMAGE = {"test_image": ""}
NOT_PROVEN = (
    "spark-worker: GPU access not proven for spark: Docker and the nvidia runtime are set up (`docker info` lists it), "
    "but no `docker run --gpus all` container ran, because docker_runtime_test_image is empty and none of "
    "glm53-tensorfold:lp9001, glm53-tensorfold:dev is on the node; expected a container to start with the GPU; fix: "
    "set docker_runtime_test_image to an image present on the node (it is never pulled) and rerun")


SETTINGS = {"test_image": "ubuntu:24.04"}
STEPS = ("install_engine", "install_toolkit", "start_engine", "configure_runtime", "restart_engine", "join_group")


def decide(probe, settings=None, **kw):
    return dr.plan(probe, dict(SETTINGS, **(settings or {})), NODE, **kw)


def steps(result):
    return [name for name in STEPS if result[name]]


# ---------------------------------------------------------------- ready nodes


@pytest.mark.parametrize("become", [False, True])
def test_ready_node_needs_nothing_and_no_become(become):
    result = decide(healthy(), become=become)
    assert steps(result) == [] and result["failures"] == []
    assert result["verify"] is False and result["probe_as_user"] is False and result["changed"] is False
    assert result["status"] == "ready" and result["gpu_image"] == "ubuntu:24.04"
    assert result["summary"] == ["spark-worker: Docker and the nvidia runtime are ready for spark: a `docker run "
                                 "--gpus all` container of ubuntu:24.04 ran"]


# ---------------------------------------------------------------- GPU access: proven only by a container


def test_runtime_listed_but_no_image_to_run_is_not_proven_and_never_ready():
    # The issue's case: `docker info` lists nvidia, docker_runtime_test_image is empty and
    # no engine image exists yet. The old judgment said "ready" here.
    result = decide(no_image(healthy()), settings=NO_TEST_IMAGE)
    assert result["status"] == "gpu_not_proven" and result["gpu_image"] is None
    assert result["summary"] == [NOT_PROVEN]
    assert not any("ready" in line for line in result["summary"])
    # It stops nothing: a stock DGX OS node before any engine image exists still deploys.
    assert result["failures"] == [] and steps(result) == []
    assert result["verify"] is False and result["changed"] is False


def test_not_proven_without_any_known_image_says_none_is_known():
    result = decide(no_image(healthy(), tried=[]), settings=NO_TEST_IMAGE)
    assert result["status"] == "gpu_not_proven" and result["failures"] == []
    assert ("docker_runtime_test_image is empty and no image the collection uses is known "
            "(docker_runtime_known_images is empty)") in result["summary"][0]


def test_an_engine_image_on_the_node_proves_gpu_access_when_no_test_image_is_set():
    result = decide(known_image_ran(healthy()), settings=NO_TEST_IMAGE)
    assert result["status"] == "ready" and result["gpu_image"] == "glm53-tensorfold:dev"
    assert result["summary"] == ["spark-worker: Docker and the nvidia runtime are ready for spark: a `docker run "
                                 "--gpus all` container of glm53-tensorfold:dev ran"]


def test_an_engine_image_whose_gpu_container_fails_fails_the_node():
    result = decide(known_image_ran(healthy(), image="glm53-tensorfold:lp9001", ok=False,
                                    stderr="nvidia-container-cli: initialization error: nvml error: driver not loaded"),
                    settings=NO_TEST_IMAGE, become=True)
    assert result["status"] == "failed"
    assert result["failures"] == [
        "[docker_runtime.container] spark-worker: `docker run --rm --gpus all --network none --pull never --entrypoint "
        "true glm53-tensorfold:lp9001` failed (rc 125): nvidia-container-cli: initialization error: nvml error: driver "
        "not loaded; expected it to run with the GPU; fix: check the NVIDIA driver (nvidia-smi) and the toolkit "
        "(nvidia-ctk --version), then rerun"]


def test_not_proven_is_judged_after_the_fixes_not_before():
    before = decide(no_runtime(no_image(healthy())), settings=NO_TEST_IMAGE, become=True)
    assert before["status"] == "changes_due" and before["verify"] is True
    assert before["summary"][0].startswith("spark-worker: the nvidia runtime is missing; fixing with become")
    after = decide(no_image(healthy()), settings=NO_TEST_IMAGE, become=True, final=True)
    assert after["status"] == "gpu_not_proven" and after["failures"] == [] and after["summary"] == [NOT_PROVEN]


def test_check_mode_on_a_node_without_an_image_is_not_proven_and_changes_nothing():
    result = decide(no_image(healthy()), settings=NO_TEST_IMAGE, check_mode=True)
    assert result["status"] == "gpu_not_proven" and result["changed"] is False and result["failures"] == []


def test_a_node_to_be_judged_again_is_pending_not_ready():
    reconnect = healthy(user__session_groups=["spark"], user__session_in_docker_group=False)
    reconnect["daemon"].update(answered=False, runtimes=[], error="permission denied", error_kind="permission")
    admin = healthy(user__name="admin", user__uid=1001, user__deploy_user="spark")
    for probe in (reconnect, admin):
        result = decide(probe, become=True)
        assert result["status"] == "pending" and result["gpu_image"] is None
        assert result["summary"][0] == "spark-worker: Docker and the nvidia runtime are to be checked again as spark"


@pytest.mark.parametrize("probe, settings, kw, status", [
    (healthy(), {}, {}, "ready"),
    (no_image(healthy()), NO_TEST_IMAGE, {}, "gpu_not_proven"),
    (no_runtime(healthy()), {}, {"become": True}, "changes_due"),
    (no_runtime(healthy()), {}, {"check_mode": True}, "changes_due"),
    (no_runtime(healthy()), {}, {}, "failed"),
    (healthy(user__name="admin", user__uid=1001, user__deploy_user="spark"), {}, {}, "failed"),
])
def test_every_status_is_one_of_the_documented_ones(probe, settings, kw, status):
    result = decide(probe, settings=settings, **kw)
    assert result["status"] == status and status in dr.STATUSES
    assert (result["status"] == "failed") == bool(result["failures"])


def test_the_documented_statuses_are_the_modules():
    from ansible_collections.dgx_spark.glm53.plugins.modules import docker_runtime_plan
    returned = yaml.safe_load(docker_runtime_plan.RETURN)["status"]["description"]
    documented = [line.split(" - ")[0].strip() for line in returned]
    assert documented == ["V(%s)" % status for status in dr.STATUSES]


# ---------------------------------------------------------------- become off


def test_missing_runtime_without_become_fails_naming_node_piece_and_fix():
    result = decide(no_runtime(healthy()))
    assert steps(result) == ["configure_runtime"]
    assert result["failures"] == [
        "[docker_runtime.runtime] the nvidia runtime is missing on spark-worker and become is off: configure it "
        "(sudo nvidia-ctk runtime configure --runtime=docker, then sudo systemctl restart docker) or rerun with become "
        "(-b, as a user with sudo; for example -e ansible_user=admin -b). Found: runtimes in `docker info`: "
        "io.containerd.runc.v2, io.containerd.runtime.v1.linux, runc; /etc/docker/daemon.json lacks runtimes.nvidia. "
        "Nothing was changed."]


def test_missing_docker_without_become_reads_as_the_issue_says():
    failures = decide(no_docker(healthy()), platform=UBUNTU_ARM)["failures"]
    assert failures[0].startswith("[docker_runtime.engine] docker is missing on spark-worker and become is off: "
                                  "install it (Docker CE from Docker's repository) or rerun with become")
    assert "Found: no docker command on PATH." in failures[0]


def test_root_needs_no_become():
    probe = no_runtime(healthy(user__name="root", user__uid=0, user__deploy_user="root"))
    result = decide(probe)
    assert result["failures"] == [] and result["configure_runtime"] and result["verify"]


def test_check_mode_reports_what_would_change_without_failing():
    result = decide(no_runtime(healthy()), check_mode=True)
    assert result["failures"] == [] and result["changed"] is True and result["verify"] is False
    assert result["summary"][0] == ("spark-worker: the nvidia runtime is missing; a real run would: register the "
                                    "runtime with nvidia-ctk and restart Docker")
    assert any("become is off" in note for note in result["notes"])


# ---------------------------------------------------------------- with become


def test_missing_runtime_with_become_is_fixed_then_verified():
    result = decide(no_runtime(healthy()), become=True)
    assert steps(result) == ["configure_runtime"] and result["failures"] == []
    assert result["verify"] is True and result["verify_become"] is False
    assert result["summary"][0] == ("spark-worker: the nvidia runtime is missing; fixing with become: register the "
                                    "runtime with nvidia-ctk and restart Docker")


def test_runtime_in_daemon_json_but_not_loaded_means_a_restart():
    probe = healthy()
    probe["daemon"]["runtimes"] = ["runc"]
    result = decide(probe, become=True)
    assert steps(result) == ["restart_engine"]


def test_default_runtime_wanted():
    probe = healthy()
    probe["daemon_json"]["runtime"].update(configured=False, missing=['"default-runtime": "nvidia"'])
    result = decide(probe, settings={"set_as_default": True})
    assert steps(result) == ["configure_runtime"]
    assert "nvidia as Docker's default runtime is missing on spark-worker" in result["failures"][0]
    assert "--set-as-default" in result["failures"][0]


def test_stopped_engine_is_started():
    probe = healthy(docker__service={"LoadState": "loaded", "ActiveState": "inactive", "UnitFileState": "enabled"})
    probe["daemon"].update(answered=False, runtimes=[], error="Cannot connect to the Docker daemon at "
                           "unix:///var/run/docker.sock. Is the docker daemon running?", error_kind="unreachable")
    result = decide(probe, become=True)
    assert steps(result) == ["start_engine"] and result["failures"] == [] and result["verify"]


def test_user_outside_the_docker_group_joins_it():
    probe = healthy(user__groups=["spark"], user__in_docker_group=False, user__session_groups=["spark"],
                    user__session_in_docker_group=False)
    probe["daemon"].update(answered=False, runtimes=[], error="permission denied while trying to connect to the "
                           "Docker daemon socket", error_kind="permission")
    result = decide(probe, become=True)
    assert steps(result) == ["join_group"] and result["failures"] == []
    no_become = decide(probe)
    assert no_become["failures"][0].startswith(
        "[docker_runtime.group] the docker group membership of spark is missing on spark-worker and become is off: "
        "add it (sudo usermod -aG docker spark, then log in again) or rerun with become")


def test_group_joined_after_the_session_started_only_needs_a_new_connection():
    probe = healthy(user__session_groups=["spark"], user__session_in_docker_group=False)
    probe["daemon"].update(answered=False, runtimes=[], error="permission denied", error_kind="permission")
    result = decide(probe)
    assert steps(result) == [] and result["failures"] == []
    assert result["reconnect"] is True and result["verify"] is True


# ---------------------------------------------------------------- another connection user


def test_admin_connection_without_become_cannot_check_the_deploy_user():
    probe = healthy(user__name="admin", user__uid=1001, user__deploy_user="spark")
    result = decide(probe)
    assert result["failures"] == [
        "[docker_runtime.access] spark-worker: connected as admin but the deploy user is spark and become is off; "
        "expected to check Docker as spark; fix: connect as spark (ansible_user) or rerun with become (-b, as a user "
        "with sudo; for example -e ansible_user=admin -b)"]


def test_admin_connection_with_become_probes_again_as_the_deploy_user():
    probe = healthy(user__name="admin", user__uid=1001, user__deploy_user="spark")
    result = decide(probe, become=True)
    assert result["probe_as_user"] is True and result["failures"] == [] and result["verify_become"] is True


# ---------------------------------------------------------------- problems no fix solves


def test_wedged_engine_fails_naming_node_command_and_deadline():
    probe = healthy()
    probe["daemon"].update(answered=False, runtimes=[], timed_out=True, timeout=3, error_kind="timeout",
                           error="`docker info --format '{{json .}}'` did not finish within 3s")
    result = decide(probe, become=True)
    assert result["failures"] == [
        "[docker_runtime.engine] spark-worker: `docker info --format '{{json .}}'` did not finish within 3s "
        "(docker_runtime_command_timeout): the Docker engine is wedged; expected an answer; fix: look at "
        "`systemctl status docker` and `journalctl -u docker`, restart the engine when nothing important runs, and rerun"]


def test_broken_daemon_json_is_never_touched():
    probe = no_runtime(healthy())
    probe["daemon_json"].update(error="not valid JSON (Expecting ',' delimiter: line 3 column 5 (char 20))", config=None,
                                runtime=None)
    result = decide(probe, become=True)
    assert result["configure_runtime"] is False
    assert result["failures"][0].startswith("[docker_runtime.daemon_json] spark-worker: /etc/docker/daemon.json is not "
                                            "valid JSON (Expecting ',' delimiter")


def test_missing_test_image_fails_with_the_fix():
    probe = healthy()
    probe["test_run"].update(present=False, ran=False, ok=False, error="image ubuntu:24.04 is not on this node")
    assert "docker pull ubuntu:24.04" in decide(probe, become=True)["failures"][0]


def test_failed_container_fails_unless_a_fix_is_pending():
    probe = healthy()
    probe["test_run"].update(ok=False, rc=125, stderr="could not select device driver")
    assert "could not select device driver" in decide(probe, become=True)["failures"][0]
    pending = no_runtime(probe)
    assert decide(pending, become=True)["failures"] == []


def test_toolkit_missing_and_not_to_be_installed():
    probe = healthy(nvidia_ctk__path=None)
    result = decide(probe, settings={"toolkit_install": False}, become=True)
    assert "docker_runtime_toolkit_install is false" in result["failures"][0]


def test_after_the_fixes_anything_still_missing_fails():
    result = decide(no_runtime(healthy()), final=True, become=True)
    assert result["failures"][0].startswith("[docker_runtime.runtime] spark-worker: after the role's changes the nvidia "
                                            "runtime is missing")
    assert decide(healthy(), final=True)["failures"] == []


# ---------------------------------------------------------------- install data


def test_ubuntu_arm64_renders_both_repositories_and_pinned_packages():
    probe = no_docker(healthy(nvidia_ctk__path=None))
    result = decide(probe, become=True, platform=UBUNTU_ARM)
    assert steps(result) == ["install_engine", "install_toolkit", "configure_runtime"]
    docker, nvidia = result["repositories"]
    assert docker == {
        "name": "docker",
        "key_url": "https://download.docker.com/linux/ubuntu/gpg",
        "key_path": "/etc/apt/keyrings/docker.asc",
        "fingerprint": "9DC858229FC7DD38854AE2D88D81803C0EBFCD88",
        "source_path": "/etc/apt/sources.list.d/docker.sources",
        "source": "# Managed by dgx_spark.glm53.docker_runtime; key pinned by fingerprint "
                  "9DC858229FC7DD38854AE2D88D81803C0EBFCD88.\n"
                  "Types: deb\nURIs: https://download.docker.com/linux/ubuntu\nSuites: noble\nComponents: stable\n"
                  "Architectures: arm64\nSigned-By: /etc/apt/keyrings/docker.asc\n",
    }
    assert nvidia["source"] == (
        "# Managed by dgx_spark.glm53.docker_runtime; key pinned by fingerprint C95B321B61E88C1809C4F759DDCAE044F796ECB0.\n"
        "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/arm64\nSuites: /\n"
        "Architectures: arm64\nSigned-By: /etc/apt/keyrings/nvidia-container-toolkit.asc\n")
    assert nvidia["key_url"] == "https://nvidia.github.io/libnvidia-container/gpgkey"
    assert result["packages"] == {
        "engine": ["docker-ce=5:28.5.2-1~ubuntu.24.04~noble", "docker-ce-cli=5:28.5.2-1~ubuntu.24.04~noble",
                   "containerd.io=1.7.28-1~ubuntu.24.04~noble"],
        "toolkit": ["nvidia-container-toolkit=1.18.1-1", "nvidia-container-toolkit-base=1.18.1-1",
                    "libnvidia-container-tools=1.18.1-1", "libnvidia-container1=1.18.1-1"]}


def test_debian_x86_from_dockers_repository():
    result = decide(no_docker(healthy()), become=True, platform=DEBIAN_X86)
    (docker,) = result["repositories"]
    assert "URIs: https://download.docker.com/linux/debian\nSuites: bookworm\n" in docker["source"]
    assert "Architectures: amd64\n" in docker["source"]
    assert result["packages"]["engine"][0] == "docker-ce=5:28.5.2-1~debian.12~bookworm"


def test_distribution_docker_io_needs_no_repository():
    result = decide(no_docker(healthy()), settings={"engine_source": "distribution"}, become=True, platform=DEBIAN_X86)
    assert result["repositories"] == [] and result["packages"]["engine"] == ["docker.io"]
    pinned = decide(no_docker(healthy()), settings={"engine_source": "distribution",
                                                    "distribution_docker_version": "20.10.24+dfsg1-1+deb12u1"},
                    become=True, platform=DEBIAN_X86)
    assert pinned["packages"]["engine"] == ["docker.io=20.10.24+dfsg1-1+deb12u1"]


@pytest.mark.parametrize("platform, fragment", [
    (dict(UBUNTU_ARM, architecture="ppc64le"), "no Debian architecture known for 'ppc64le'"),
    (dict(UBUNTU_ARM, os_family="RedHat", distribution="Rocky"), "installing needs an apt-based node"),
    (dict(UBUNTU_ARM, distribution="Linuxmint"), "Docker's repository has packages for Ubuntu and Debian"),
])
def test_install_on_an_unsupported_platform_fails_before_changing_anything(platform, fragment):
    result = decide(no_docker(healthy()), become=True, platform=platform)
    assert any(fragment in f for f in result["failures"]), result["failures"]
    assert result["repositories"] == []


@pytest.mark.parametrize("version, expected", [
    ("28.5.2", "5:28.5.2-1~ubuntu.24.04~noble"),
    ("5:28.5.1-1~ubuntu.24.04~noble", "5:28.5.1-1~ubuntu.24.04~noble"),
    ("", ""),
])
def test_apt_version(version, expected):
    assert dr.apt_version(version, "ubuntu", "24.04", "noble", epoch="5") == expected


@pytest.mark.parametrize("machine, arch", [("aarch64", "arm64"), ("x86_64", "amd64"), ("AARCH64", "arm64"),
                                           ("riscv64", None)])
def test_deb_architecture(machine, arch):
    assert dr.deb_architecture(machine) == arch


def test_plugin_defaults_are_the_roles_defaults():
    with open(os.path.join(ROOT, "roles", "docker_runtime", "defaults", "main.yml")) as handle:
        role = yaml.safe_load(handle)
    for key, value in dr.DEFAULTS.items():
        name = "docker_runtime_" + {"timeout": "command_timeout"}.get(key, key)
        if key == "runtime":
            continue
        assert role[name] == value, name


def test_a_running_engine_proves_the_gpu_and_says_so():
    engine = {"name": "glm53-tf-r1", "path": "tensorfold", "image": "glm53-tensorfold:lp9001",
              "started": "2026-12-04T17:53:23.620838138Z"}
    probe = healthy(test_run__source="running_engine", test_run__ran=False, test_run__rc=None, test_run__command=None,
                    test_run__image="glm53-tensorfold:lp9001", test_run__tried=[], test_run__engine=engine)
    result = decide(probe)
    assert result["status"] == "ready" and result["gpu_image"] == "glm53-tensorfold:lp9001"
    assert result["summary"] == [
        "spark-worker: Docker and the nvidia runtime are ready for spark: the tensorfold engine container glm53-tf-r1 "
        "(glm53-tensorfold:lp9001) has run with the GPU since 2026-12-04T17:53:23.620838138Z, after docker.service "
        "started, so no test container was run"]
