"""The lab side of the TensorFold path (lab/README.md, "TensorFold path"): the simulated
kit and profile repositories served by the lab git server, the base image in every node's
engine, and the kit's serve.sh driving both nodes as the tensorfold role will: clone at the
recorded commits, configure from the C8 profile, build and ship, start, serve, stop, and
build the profile's lp9001 image."""

from __future__ import annotations

import json
import re

import pytest

from lab_faults import spark_lab

HOME = "/home/spark"
KIT = f"{HOME}/glm53-tensorfold-spark"
PROFILE = f"{HOME}/glm-5.3-flash-2xdgx-spark"
HF = f"{HOME}/.cache/huggingface"
GLM53_TF = f"{HOME}/.cache/glm53-tf"  # serve.sh's prepared/sessions defaults: ${HF%/*}/glm53-tf
# A tiny stand-in snapshot on both nodes (the simulated engine needs only its config.json).
MODEL_REV = "0123456789abcdef0123456789abcdef01234567"
MODEL_DIR = f"hub/models--glm53-lab--tiny-tf/snapshots/{MODEL_REV}"
DRAFTER_DIR = f"hub/models--glm53-lab--tiny-drafter/snapshots/{MODEL_REV}"
IMAGES = "glm53-tensorfold:dev glm53-tensorfold:lp9001"


def on(node, script, user="spark", check=True, timeout=120, input=None):
    return spark_lab.node_exec(node, script, user=user, check=check, timeout=timeout, input=input)


def serve(command, check=False, timeout=180):
    """scripts/serve.sh <command> on the head as spark, from the kit checkout."""
    return on("spark-head", f"cd {KIT} && scripts/serve.sh {command}", check=check, timeout=timeout)


def lab_env(example: str, worker_link: str, head_link: str) -> str:
    """The profile's C8 example with the lab's values: every assignment of these keys
    replaced in place (comments, order and the other keys kept)."""
    values = {
        "WORKER_SSH": f'"spark@{worker_link}"',
        "HEAD_IP": head_link,
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1",
        "NCCL_IB_HCA": "rocep1s0f1",
        "HEAD_HF": HF,
        "WORKER_HF": HF,
        "MODEL_PATH": f"/root/.cache/huggingface/{MODEL_DIR}",
        "DRAFTER": f"/root/.cache/huggingface/{DRAFTER_DIR}",
        "IMAGE": "glm53-tensorfold:dev",
        # Lab-sized memory gate: the nodes share the controller's memory.
        "MEM_GATE_GIB": "1",
    }
    seen = set()
    lines = []
    for line in example.splitlines():
        m = re.match(r"([A-Z0-9_]+)=", line)
        if m and m.group(1) in values:
            seen.add(m.group(1))
            line = f"{m.group(1)}={values[m.group(1)]}"
        lines.append(line)
    assert seen == set(values), f"the example lacks {set(values) - seen}"
    return "\n".join(lines) + "\n"


def cleanup(nodes):
    for node in nodes:
        on(node, "docker rm -f glm53-tf-r0 glm53-tf-r1 >/dev/null 2>&1; "
                 f"docker image rm -f {IMAGES} >/dev/null 2>&1; docker volume rm glm53-tf-cache >/dev/null 2>&1; "
                 f"rm -rf {KIT} {PROFILE} {HF}/hub/models--glm53-lab--tiny-* {GLM53_TF} {HOME}/.local/state/glm53-tf; true",
           user="root")


@pytest.fixture(scope="module")
def commits(lab):
    return json.loads((spark_lab.GIT_COMMITS).read_text())


@pytest.fixture(scope="module")
def kit(lab, commits):
    """Kit and profile cloned on the head at the recorded commits, prod.env written from
    the profile's C8 example, the stand-in snapshot on both nodes."""
    nodes = list(lab.nodes)
    cleanup(nodes)
    for node in nodes:
        on(node, f"for d in {MODEL_DIR} {DRAFTER_DIR}; do mkdir -p {HF}/$d && "
                 f"echo '{{\"model_type\": \"glm5_next\"}}' > {HF}/$d/config.json; done")
    on("spark-head", f"git clone -q --recurse-submodules {commits['kit']['url']} {KIT} && "
                     f"git -C {KIT} checkout -q {commits['kit']['commit']} && "
                     f"git -C {KIT} submodule update -q --init && "
                     f"git clone -q {commits['profile']['url']} {PROFILE} && "
                     f"git -C {PROFILE} checkout -q {commits['profile']['commit']}")
    example = on("spark-head", f"cat {PROFILE}/tensorfold/config/prod-c8.env.example").stdout
    worker = lab.nodes["spark-worker"]
    env = lab_env(example, worker_link=worker.link1, head_link=lab.head.link1)
    on("spark-head", f"cat > {KIT}/config/prod.env", input=env)
    yield env
    cleanup(nodes)


@pytest.fixture(scope="module")
def built(kit):
    result = serve("build", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def image_id(node, image):
    return on(node, f"docker image inspect -f '{{{{.Id}}}}' {image}", check=False).stdout.strip()


def test_base_image_is_in_every_engine(lab):
    want = spark_lab.inspect("image", spark_lab.PYTORCH_IMAGE)["Id"]
    for node in lab.nodes:
        assert image_id(node, spark_lab.PYTORCH_IMAGE) == want
        pip = on(node, f"docker run --rm {spark_lab.PYTORCH_IMAGE} python3 -m pip --version").stdout
        assert "python 3" in pip


def test_checkouts_are_at_the_recorded_commits_with_the_engine_submodule(kit, commits):
    heads = on("spark-head", f"git -C {KIT} rev-parse HEAD; git -C {KIT}/vendor/TensorFold rev-parse HEAD; "
                             f"git -C {PROFILE} rev-parse HEAD").stdout.split()
    assert heads == [commits["kit"]["commit"], commits["tensorfold"]["commit"], commits["profile"]["commit"]]
    assert commits["kit"]["submodule"] == {"vendor/TensorFold": commits["tensorfold"]["commit"]}
    files = on("spark-head", f"cd {KIT} && ls scripts/serve.sh docker/Dockerfile docker/entrypoint.sh "
                             "config/prod.env.example vendor/TensorFold/pyproject.toml && test -x scripts/serve.sh")
    assert files.returncode == 0


def test_profile_commits_differ_only_in_the_overlay(commits):
    first, second = commits["profile"]["commits"]
    assert second == commits["profile"]["commit"]
    repo = spark_lab.GIT_ROOT / "profile.git"
    changed = spark_lab.git(repo, "diff", "--name-only", first, second).split()
    assert changed and all(p.startswith("tensorfold/patches/overlay/") for p in changed)


def test_the_git_server_is_read_only(kit, commits):
    push = on("spark-head", f"cd {KIT} && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x "
                            "&& git push origin HEAD:refs/heads/x", check=False)
    assert push.returncode != 0
    assert spark_lab.git_served(commits)


def test_placeholders_left_in_the_config_stop_with_exit_2(kit):
    broken = kit.replace(f"HEAD_HF={HF}", 'HEAD_HF="<head HF cache>"')
    on("spark-head", f"cat > {KIT}/config/broken.env", input=broken)
    result = on("spark-head", f"cd {KIT} && CONFIG=config/broken.env scripts/serve.sh start", check=False)
    assert result.returncode == 2
    assert "[glm53-tf] config/broken.env: set HEAD_HF (still '<head HF cache>')" in result.stdout


def test_build_ships_the_same_image_to_the_worker(built):
    head, worker = image_id("spark-head", "glm53-tensorfold:dev"), image_id("spark-worker", "glm53-tensorfold:dev")
    assert head.startswith("sha256:") and head == worker
    assert "[glm53-tf] shipping glm53-tensorfold:dev to the worker" in built.stdout
    preflight = serve("preflight")
    assert preflight.returncode == 0 and preflight.stdout.rstrip().endswith("[glm53-tf] preflight ok"), preflight.stdout


def test_start_serves_on_the_head_and_stop_removes_both_ranks(built, lab):
    try:
        start = serve("start", timeout=240)
        out = start.stdout
        assert start.returncode == 0, out + start.stderr
        assert re.search(r"^\[glm53-tf\] ready after \d+ s$", out, re.M), out
        assert "[glm53-tf] request slots: 8 (GLM53_TF_BATCH=8)" in out
        models = json.loads(on("spark-head", "curl -sf -m 5 http://127.0.0.1:8000/v1/models").stdout)
        assert [m["id"] for m in models["data"]] == ["glm-5.3-flash"]

        r0 = json.loads(on("spark-head", "docker inspect glm53-tf-r0").stdout)[0]
        r1 = json.loads(on("spark-worker", "docker inspect glm53-tf-r1").stdout)[0]
        for info in (r0, r1):
            assert info["State"]["Running"]
            host = info["HostConfig"]
            assert (host["NetworkMode"], host["IpcMode"], host["CapAdd"]) == ("host", "host", ["IPC_LOCK"])
            assert host["DeviceRequests"][0]["Count"] == -1  # --gpus all
            mounts = {m["Destination"]: m.get("Name") or m["Source"] for m in info["Mounts"]}
            assert mounts == {"/root/.cache/huggingface": HF, "/cache": "glm53-tf-cache",
                              "/prepared": f"{GLM53_TF}/prepared", "/sessions": f"{GLM53_TF}/sessions"}
            env = dict(e.split("=", 1) for e in info["Config"]["Env"])
            # The profile sets GLM53_TF_BATCH_PIECE twice: the last assignment wins.
            assert env["GLM53_TF_BATCH_PIECE"] == "4096"
            assert (env["MASTER"], env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == (
                "198.18.1.10", "enp1s0f1np1", "enp1s0f1np1")
            assert env["GLM53_TF_IMAGE_ID"] == image_id("spark-head", "glm53-tensorfold:dev")
        ranks = [[e for e in r["Config"]["Env"] if e.startswith("RANK=")] for r in (r0, r1)]
        assert ranks == [["RANK=0"], ["RANK=1"]], ranks
        boot = on("spark-head", "docker logs glm53-tf-r0 2>&1").stdout
        assert re.search(r"^\[boot\] r0 \+\d+\.\ds container started$", boot, re.M), boot

        status = serve("status")
        assert status.returncode == 0 and "glm53-tf-r1 Up" in status.stdout
    finally:
        stop = serve("stop")
    assert stop.returncode == 0 and "[glm53-tf] stopped" in stop.stdout
    for node in ("spark-head", "spark-worker"):
        left = on(node, "docker ps -aq --filter name=glm53-tf-r").stdout.strip()
        assert left == "", f"{node} still has a rank container"


def test_rank_1_that_cannot_start_fails_the_start_with_exit_1(built):
    # No snapshot on the worker: rank 1 exits at once and the start says so.
    on("spark-worker", f"mv {HF}/{MODEL_DIR} {HF}/{MODEL_DIR}.away")
    try:
        start = serve("start", timeout=120)
    finally:
        on("spark-worker", f"mv {HF}/{MODEL_DIR}.away {HF}/{MODEL_DIR}")
        serve("stop")
    assert start.returncode == 1, start.stdout
    assert "[glm53-tf] rank 1 exited; its last 40 log lines:" in start.stdout


def test_page_cache_costs_slots_and_start_exits_3_with_the_server_up(built):
    # The simulated engine fits its slots against the node's MemFree (on a GB10 page cache
    # counts as used): 1.5 GiB of page cache on the head's 4 GiB leaves room for about half of
    # them. The lab's spark has no sudo, so the kit's two forced drops fail and the start ends
    # with exit 3, the short server left running.
    ballast = "/home/spark/glm53-ballast"
    on("spark-head", f"head -c 1536M /dev/zero > {ballast} && cat {ballast} > /dev/null")
    # Read again now and then during the start, as a serving node's other readers would: the
    # controller's own memory pressure must not turn the cache cold behind the test's back.
    # The kit cannot drop it either way (spark has no sudo), which is what is asserted.
    warm = "/tmp/glm53-keep-warm.pid"
    on("spark-head", f"nohup sh -c 'while :; do cat {ballast} > /dev/null; sleep 2; done' >/dev/null 2>&1 & "
                     f"echo $! > {warm}")
    try:
        start = serve("start", timeout=180)
        models = on("spark-head", "curl -sf -m 5 http://127.0.0.1:8000/v1/models", check=False)
    finally:
        on("spark-head", f"kill $(cat {warm}) 2>/dev/null; rm -f {warm} {ballast}", check=False)
        serve("stop")
    out = start.stdout
    assert start.returncode == 3, out
    assert out.count("[glm53-tf] too few request slots: dropping the page caches on both nodes and restarting") == 2
    fewer = re.findall(r"\[glm53-tf\] request slots: ([0-9]+), fewer than GLM53_TF_BATCH=8", out)
    assert fewer and all(1 <= int(n) < 8 for n in fewer), out
    assert models.returncode == 0  # left running


def test_profile_lp9001_builds_on_a_node(built):
    build = on("spark-head", f"cd {PROFILE}/tensorfold/patches && docker build --build-arg BASE=glm53-tensorfold:dev "
                             "-t glm53-tensorfold:lp9001 -f Dockerfile.logprobs overlay", check=False, timeout=180)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "patches/9001-9004 ok" in build.stdout
    assert image_id("spark-head", "glm53-tensorfold:lp9001") != image_id("spark-head", "glm53-tensorfold:dev")


def test_serve_sh_refuses_a_missing_config_with_exit_2(kit):
    result = on("spark-head", f"cd {KIT} && CONFIG=config/none.env scripts/serve.sh start", check=False)
    assert result.returncode == 2
    assert result.stdout.startswith("[glm53-tf] no config/none.env: cp config/prod.env.example config/none.env")


def test_caller_environment_wins_for_the_kit_keys_only(kit):
    # IMAGE is a caller key; WORKER_SSH is not (the file's value is used).
    result = on("spark-head", f"cd {KIT} && IMAGE=glm53-lab/none:x WORKER_SSH=nobody@198.18.1.99 "
                              "scripts/serve.sh preflight", check=False)
    assert result.returncode == 1
    assert "no image glm53-lab/none:x on the head" in result.stdout
    assert "cannot ssh" not in result.stdout
