"""Path tensorfold end to end on the lab: site.yml -e path=tensorfold drives the simulated
kit (lab/sim/kit: serve.sh with the real kit's CLI contract, exit codes and container
names), the simulated profile (the C8 env and Dockerfile.logprobs with its overlay) and
the simulated engine (slots from measured page-cache residency; rank 1 meets rank 0 over
the link), with real git, real Docker engines on each node, real ssh and the real page
cache. Asserted: what an operator sees - the play's outcome and messages, the containers
and their start times, the API's answers, prod.env, and the images on both nodes.

Cost: the most of any module. A cold deploy of the whole site.yml on two nodes (kit and profile
checkouts, two image builds, a start that waits for 8 slots), then each behaviour that needs a
restart (a changed setting and port, another profile commit, the image without patch 9001, a
start with and without eviction, two failed starts) restarts both ranks once, on the module's
one deployment."""

from __future__ import annotations

import json
import re
import shlex
import time

from pathlib import Path

import pytest

from lab_faults import HEAD, WORKER, sh

REPO = Path(__file__).resolve().parents[2]
SITE = "playbooks/site.yml"
TF = {"path": "tensorfold"}
# After the module's cold deploy (the whole site.yml, then its rerun), a run that changes only
# what tensorfold reads runs the weights (they publish glm53_weights, which tensorfold checks)
# and tensorfold: the preflight and docker_runtime are not the subject, and their contract
# and runtime are already on the nodes.
ROLES = ["hf_weights", "tensorfold"]
KIT = "/home/spark/glm53-tensorfold-spark"
SESSIONS = "/home/spark/.cache/glm53-tf/sessions"
API = "http://127.0.0.1:8000"
STATE = "/home/spark/.local/state/glm53-tf-prod"
START_TIMEOUT = 300  # tensorfold_start_timeout for the failing starts (the default is 1800)
# lab/inventory's own overrides (a lab-sized memory gate): a test's overrides add to them.
LAB_OVERRIDES = {"MEM_GATE_GIB": 3}


def spark(node, script, check=True):
    return sh(node, script, user="spark", check=check)


def started_at(node, name):
    run = spark(node, f"docker inspect -f '{{{{.State.StartedAt}}}} {{{{.State.Running}}}}' {name}", check=False)
    return run.stdout.strip() if run.returncode == 0 else None


def ranks():
    return started_at(HEAD, "glm53-tf-r0"), started_at(WORKER, "glm53-tf-r1")


def running_ranks():
    return [(node, spark(node, "docker ps -q --filter name=glm53-tf-r").stdout.split()) for node in (HEAD, WORKER)]


def api(path, payload=None):
    data = "" if payload is None else f"-H 'Content-Type: application/json' -d {shlex.quote(json.dumps(payload))}"
    out = spark(HEAD, f"curl -sf -m 30 {data} {API}{path}").stdout
    return json.loads(out)


def slots_in_log():
    return spark(HEAD, "docker logs glm53-tf-r0 2>&1 | grep -oE '[0-9]+ request slot\\(s\\)' | tail -n 1").stdout.strip()


def stop_service():
    spark(HEAD, f"cd {KIT} && scripts/serve.sh stop >/dev/null 2>&1 || true", check=False)


def image_id(node, tag):
    return spark(node, f"docker image inspect -f '{{{{.Id}}}}' {tag}").stdout.strip()


def rank_facts(node, name):
    """What a rank container runs: its id, start time, image id and environment."""
    run = spark(node, f"docker inspect -f '{{{{json .}}}}' {name}")
    facts = json.loads(run.stdout)
    env = dict(item.split("=", 1) for item in facts["Config"]["Env"] if "=" in item)
    return {"id": facts["Id"], "started": facts["State"]["StartedAt"], "image": facts["Image"], "env": env}


def both_rank_facts():
    return rank_facts(HEAD, "glm53-tf-r0"), rank_facts(WORKER, "glm53-tf-r1")


@pytest.fixture(scope="module")
def deployed(lab):
    """One cold deploy for the module (the weights come from the lab hub)."""
    from conftest import PlaybookRunner  # pylint: disable=import-outside-toplevel
    runner = PlaybookRunner(Path(lab.inventory), "tensorfold-cold")
    # The lab's nodes start without the nvidia runtime (the docker_runtime role adds it, with
    # become as admin), as a node that is not stock DGX OS would.
    runner("playbooks/docker_runtime.yml", extravars={"ansible_user": "admin", "docker_runtime_user": "spark"},
           cmdline="-b")
    stop_service()
    # As a stop and three failed watchdog checks leave them: READY must clear both.
    spark(HEAD, f"mkdir -p {STATE} && touch {STATE}/DISABLED && echo 3 > {STATE}/fails && test -s {STATE}/fails")
    started = time.monotonic()
    cold = runner(SITE, extravars=TF)
    yield {"run": cold, "seconds": time.monotonic() - started, "runner": runner}
    stop_service()  # later tests start their own containers under these names


def test_cold_deploy_serves_8_slots_and_a_rerun_changes_and_restarts_nothing(deployed, run_playbook):
    assert slots_in_log() == "8 request slot(s)"
    health = api("/health")
    assert health["ok"] is True
    models = api("/v1/models")
    assert models["data"][0]["max_model_len"] == 1048576
    before = ranks()
    assert all(b and b.endswith("true") for b in before), before
    again = run_playbook(SITE, extravars=TF, ident="rerun")
    assert again.changed_total == 0
    assert ranks() == before, "a converged rerun restarted a rank"
    log = spark(HEAD, f"cat {STATE}/tf-prod.log").stdout
    assert "READY 8 slots" in log
    left = set(spark(HEAD, f"ls -A {STATE}").stdout.split())
    assert "tf-prod.log" in left and not left & {"DISABLED", "fails"}, f"DISABLED or fails left after READY: {left}"


# How long the busy requests would generate for: far past any rerun. The client ends them.
BUSY_SECONDS = 300
BUSY_CURL = "curl -sN -m %d" % (BUSY_SECONDS + 60)


def long_requests(count, seconds):
    """Start ``count`` streamed chat completions on the head, each long enough to generate for
    about ``seconds`` (ignore_eos holds each to its max_tokens), each stream into
    /tmp/glm53-busy/N.sse. The caller ends them (pkill BUSY_CURL)."""
    probe = {"model": "glm-5.3-flash", "max_tokens": 200, "ignore_eos": True,
             "messages": [{"role": "user", "content": "count"}]}
    started = time.monotonic()
    assert api("/v1/chat/completions", probe)["usage"]["completion_tokens"] == 200
    rate = 200 / (time.monotonic() - started)
    body = shlex.quote(json.dumps(dict(probe, max_tokens=int(rate * seconds), stream=True)))
    spark(HEAD, "rm -rf /tmp/glm53-busy && mkdir -p /tmp/glm53-busy && for i in $(seq %d); do "
                "nohup %s -H 'Content-Type: application/json' -d %s %s/v1/chat/completions "
                "> /tmp/glm53-busy/$i.sse 2>/dev/null & done" % (count, BUSY_CURL, body, API))


def stream_sizes(count):
    """Bytes each streamed answer in /tmp/glm53-busy holds so far."""
    out = spark(HEAD, "for i in $(seq %d); do stat -c %%s /tmp/glm53-busy/$i.sse; done" % count).stdout
    return [int(size) for size in out.split()]


def test_a_rerun_under_full_load_changes_and_restarts_nothing(deployed, run_playbook):
    """8 long streamed requests hold the 8 slots, so the rerun probe's canary waits behind them:
    busy, not unhealthy. Nothing is restarted, and every stream goes on after the rerun.

    The requests are sized to outlast any rerun (BUSY_SECONDS of tokens) and are ended by the
    client once the rerun is judged, so the test never depends on how long the rerun takes."""
    before = both_rank_facts()
    long_requests(8, seconds=BUSY_SECONDS)
    try:
        deadline = time.monotonic() + 30
        while api("/health")["inflight"] < 8 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert api("/health")["inflight"] == 8
        again = run_playbook(SITE, tags=ROLES, extravars=TF, ident="rerun-busy")
        assert again.changed_total == 0
        assert "busy with requests in flight, healthy" in again.stdout
        assert [(f["id"], f["started"]) for f in both_rank_facts()] == [(f["id"], f["started"]) for f in before]
        assert api("/health")["inflight"] == 8
        # Every stream still grows after the rerun: none was cut, none ended early.
        sizes = stream_sizes(8)
        time.sleep(3)
        grown = stream_sizes(8)
        assert all(after > size > 0 for size, after in zip(sizes, grown)), (sizes, grown)
        ended = spark(HEAD, "grep -lE '\"error\"|\\[DONE\\]' /tmp/glm53-busy/*.sse", check=False).stdout
        assert not ended, f"streams that failed or ended before the client left: {ended}"
    finally:
        # ([c]url: the pattern must not match the shell that runs pkill.)
        spark(HEAD, f"pkill -f '[c]{BUSY_CURL[1:]}' || true")
    # The engine frees the slots of the clients that left, and serves again.
    deadline = time.monotonic() + 30
    while api("/health")["inflight"] > 0:
        assert time.monotonic() < deadline, "the slots of the ended streams were not freed"
        time.sleep(0.5)
    probe = {"model": "glm-5.3-flash", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    assert api("/v1/chat/completions", probe)["choices"][0]["finish_reason"] in ("length", "stop")


def test_prod_env_is_the_c8_profile_with_the_sites_values(deployed):
    env = spark(HEAD, f"cd {KIT} && env -i bash -c 'set -a; . config/prod.env; env'").stdout
    values = dict(line.split("=", 1) for line in env.splitlines() if "=" in line)
    assert values["GLM53_TF_BATCH"] == "8" and values["GLM53_TF_BATCH_ADMIT_GB"] == "0.25"
    assert values["GLM53_TF_BATCH_PIECE"] == "4096"
    assert spark(HEAD, f"grep -c '^GLM53_TF_BATCH_PIECE=' {KIT}/config/prod.env").stdout.strip() == "1"
    assert values["IMAGE"] == "glm53-tensorfold:lp9001" and values["HOST"] == "127.0.0.1" and values["PORT"] == "8000"
    assert values["HEAD_IP"] == "198.18.1.10" and values["WORKER_SSH"] == "spark@198.18.1.11"
    assert values["DRAFTER"] == ""  # the drafter's license was not accepted
    assert values["MODEL_PATH"].startswith("/root/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/")


def test_logprobs_come_from_lp9001_and_are_null_on_the_kit_image(deployed, run_playbook):
    # Thinking off: logprobs cover answer tokens only (patch 9001), never reasoning.
    ask = {"model": "glm-5.3-flash", "max_tokens": 8, "logprobs": True, "top_logprobs": 2,
           "chat_template_kwargs": {"enable_thinking": False}, "messages": [{"role": "user", "content": "hi"}]}
    answer = api("/v1/chat/completions", ask)
    assert answer["choices"][0]["logprobs"]["content"], answer
    # Left on the kit image: the next test's run (a changed setting) puts both ranks back on
    # lp9001, and asserts logprobs again there.
    run_playbook(SITE, tags=ROLES, extravars=dict(TF, tensorfold_image="glm53-tensorfold:dev"), ident="dev-image")
    assert api("/v1/chat/completions", ask)["choices"][0].get("logprobs") is None


def test_a_changed_setting_and_port_restart_both_ranks_onto_them(deployed, run_playbook):
    """The ranks are CUDA processes nvidia-smi lists (as on a GB10), so the kit's start refuses
    while they run: new prod.env values reach them only through a restart of both ranks. PORT
    comes from glm53_api_port, and the role waits for the API there. Leaves the engine on 8001
    with GLM53_TF_STATS=full: the profile-change test's run puts both back. Run after
    the logprobs test, which leaves the ranks on the kit image: this run is also its way back to
    lp9001, where answers carry logprobs again."""
    before = both_rank_facts()
    assert before[0]["env"]["GLM53_TF_STATS"] == "summary"
    changed = dict(TF, glm53_api_port=8001, tensorfold_env_overrides=dict(LAB_OVERRIDES, GLM53_TF_STATS="full"))
    run = run_playbook(SITE, tags=ROLES, extravars=changed, ident="changed-setting-port")
    assert run.changed_total > 0
    after = both_rank_facts()
    for node, old, new in zip((HEAD, WORKER), before, after):
        assert new["id"] != old["id"] and new["started"] > old["started"], f"{node}: rank not restarted"
        assert new["env"]["GLM53_TF_STATS"] == "full", f"{node}: the rank runs the old setting"
        assert new["image"] == image_id(node, "glm53-tensorfold:lp9001")
    assert after[0]["env"]["PORT"] == "8001"
    assert "PORT=8001" in spark(HEAD, f"grep -E '^(HOST|PORT)=' {KIT}/config/prod.env").stdout.split()
    models = json.loads(spark(HEAD, "curl -sf -m 10 http://127.0.0.1:8001/v1/models").stdout)
    assert models["data"][0]["id"] == "glm-5.3-flash"
    assert spark(HEAD, f"curl -sf -m 5 {API}/v1/models", check=False).returncode != 0, "still serving on 8000"
    assert "READY 8 slots" in spark(HEAD, f"tail -n 1 {STATE}/tf-prod.log").stdout
    ask = {"model": "glm-5.3-flash", "max_tokens": 8, "logprobs": True, "top_logprobs": 2,
           "chat_template_kwargs": {"enable_thinking": False}, "messages": [{"role": "user", "content": "hi"}]}
    answer = json.loads(spark(HEAD, "curl -sf -m 30 -H 'Content-Type: application/json' -d %s "
                                    "http://127.0.0.1:8001/v1/chat/completions" % shlex.quote(json.dumps(ask))).stdout)
    assert answer["choices"][0]["logprobs"]["content"], answer


def test_unknown_override_fails_before_any_change(deployed, run_playbook):
    # Before the profile test, which leaves the profile at another commit: this run's checkout
    # of the pinned one would be a change.
    before = ranks()
    run = run_playbook(SITE, tags=ROLES, extravars=dict(TF, tensorfold_env_overrides=dict(LAB_OVERRIDES, GLM53_TF_BACH=4)),
                       expect_success=False)
    run.assert_failed()
    assert "unknown key 'GLM53_TF_BACH' (did you mean GLM53_TF_BATCH" in run.stdout
    assert run.changed_total == 0 and ranks() == before


def test_a_changed_profile_commit_rebuilds_lp9001_on_both_nodes_and_restarts(deployed, run_playbook):
    # lab/.state/git/commits.json: the profile's two commits; the second changes only the overlay.
    state = json.loads((REPO / "lab" / ".state" / "git" / "commits.json").read_text())
    other = state["profile"]["commits"][0]
    assert other != state["profile"]["commit"]
    before_ids = (image_id(HEAD, "glm53-tensorfold:lp9001"), image_id(WORKER, "glm53-tensorfold:lp9001"))
    before = ranks()
    # Left on the other commit's image: the next run with the pinned commit (the large-image
    # test's) rebuilds lp9001 from it, as any change back would.
    run = run_playbook(SITE, tags=ROLES, extravars=dict(TF, tensorfold_profile_commit=other), ident="other-profile")
    after_ids = (image_id(HEAD, "glm53-tensorfold:lp9001"), image_id(WORKER, "glm53-tensorfold:lp9001"))
    assert after_ids[0] != before_ids[0] and after_ids[1] != before_ids[1]
    assert ranks() != before and run.changed_total > 0
    # Both ranks run the image just built on their node, not the one they ran before.
    assert [facts["image"] for facts in both_rank_facts()] == list(after_ids)


def test_stop_yml_stops_both_ranks_with_the_kits_stop_and_keeps_the_images(deployed, run_playbook):
    assert all(ranks()), "the service runs before the stop"
    run = run_playbook("playbooks/stop.yml", extravars=TF)
    assert ranks() == (None, None)
    assert "no tensorfold rank remains" in run.stdout
    assert image_id(HEAD, "glm53-tensorfold:lp9001") and image_id(WORKER, "glm53-tensorfold:lp9001")
    # Stop means stop: DISABLED first, then every rank under the kit's lock, the head first, logged.
    assert spark(HEAD, f"test -e {STATE}/DISABLED && echo set").stdout.strip() == "set"
    # (Rank 1 may have exited by the time its turn comes: it ends when rank 0 goes.)
    assert re.search(r"stopped \(playbooks/stop.yml; DISABLED marker set\): spark-head removed running, "
                     r"spark-worker removed (running|exited)", spark(HEAD, f"cat {STATE}/tf-prod.log").stdout)
    assert "no tensorfold rank remains (glm53-tf-r0 removed (was running))" in run.stdout


BALLAST = "glm53-lab/ballast:1"
# A one-file image of 1.25 GiB (a tar stream on stdout, for docker import).
BALLAST_TAR = """import sys, tarfile
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
info = tarfile.TarInfo("ballast")
info.size = 1280 << 20
with open("/dev/zero", "rb") as zero:
    out.addfile(info, zero)
out.close()
"""


def test_a_large_image_load_costs_slots_unless_the_balloon_evicts_its_layers(deployed, run_playbook):
    stop_service()
    # An image's layers on the worker, written by its dockerd as root (as the kit's build's
    # `docker save | ssh worker docker load` writes them): nothing the role can name holds
    # them, and they stay in the page cache - 1.25 GiB of the node's 4 GiB, which the engine
    # counts as used at load. Made on the worker itself: the point is the layers, not the pipe.
    spark(WORKER, f"python3 - <<'EOF' | docker import - {BALLAST} >/dev/null\n{BALLAST_TAR}EOF")
    try:
        # Without eviction (and the kit's gate cut short: it would wait its whole timeout for the
        # MemFree it wants, then start anyway) the start boots fewer slots and fails, naming them.
        run = run_playbook(SITE, tags=ROLES, extravars=dict(
            TF, tensorfold_evict=False, tensorfold_start_attempts=1,
            tensorfold_env_overrides=dict(LAB_OVERRIDES, MEM_GATE_TIMEOUT=5)), expect_success=False)
        run.assert_failed()
        short = re.search(r"([0-9]+) request slot\(s\), want 8", run.stdout)
        assert short and 1 <= int(short.group(1)) < 8, run.stdout
        assert "tensorfold_evict" in run.stdout
        assert running_ranks() == [(HEAD, []), (WORKER, [])], "a failed start left a rank running"
        # With it: the worker's layers are out of the page cache (the balloon: evicting what the
        # role names is not enough there), and all 8 slots load.
        fixed = run_playbook(SITE, tags=ROLES, extravars=TF, ident="with-eviction")
        assert fixed.changed_total > 0 and slots_in_log() == "8 request slot(s)"
        said = " ".join(fixed.stdout.split())  # the debug output wraps its lines
        line = re.search(r"spark-worker: MemFree ([0-9.]+) GiB -> ([0-9.]+) GiB after evicting [0-9.]+ GiB it names "
                         r"-> ([0-9.]+) GiB after a ([0-9.]+) GiB balloon", said)
        assert line, fixed.stdout
        assert float(line.group(2)) < 3 <= float(line.group(3)), line.group(0)
    finally:
        spark(WORKER, f"docker image rm {BALLAST} >/dev/null 2>&1 || true", check=False)


def test_a_worker_rank_killed_during_start_fails_fast_with_both_ranks_lines(deployed, run_playbook):
    stop_service()
    # Kill rank 1 whenever it runs, for the whole start (both attempts).
    sh(WORKER, "nohup bash -c 'for i in $(seq 600); do docker kill glm53-tf-r1 >/dev/null 2>&1; sleep 0.2; done' "
               ">/dev/null 2>&1 & echo $! > /tmp/glm53-killer.pid")
    try:
        started = time.monotonic()
        run = run_playbook(SITE, tags=ROLES, extravars=dict(TF, tensorfold_start_timeout=START_TIMEOUT),
                           expect_success=False)
        took = time.monotonic() - started
    finally:
        sh(WORKER, "kill $(cat /tmp/glm53-killer.pid) 2>/dev/null; rm -f /tmp/glm53-killer.pid", check=False)
    run.assert_failed()
    # Both attempts ended on the exit, long before a start would time out (the whole play
    # takes less than one attempt's timeout).
    assert took < START_TIMEOUT, took
    assert "rank 1" in run.stdout and "exited" in run.stdout
    assert "glm53-tf-r0 on spark-head" in run.stdout and "glm53-tf-r1 on spark-worker" in run.stdout
    assert running_ranks() == [(HEAD, []), (WORKER, [])]
    # That the next run starts again after a failed start is the warm-cache test's fix run.


def test_a_silent_hang_is_not_ready_and_names_the_canary(deployed, run_playbook):
    stop_service()
    spark(HEAD, f"mkdir -p {SESSIONS} && touch {SESSIONS}/lab-hang")
    try:
        run = run_playbook(SITE, tags=ROLES,
                           extravars=dict(TF, tensorfold_start_attempts=1, tensorfold_canary_timeout=5),
                           expect_success=False)
    finally:
        spark(HEAD, f"rm -f {SESSIONS}/lab-hang")
    run.assert_failed()
    assert "canary" in run.stdout and "wedged" in run.stdout
    assert running_ranks() == [(HEAD, []), (WORKER, [])], "a failed start left a rank running"
