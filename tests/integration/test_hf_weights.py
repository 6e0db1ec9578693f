"""hf_weights end to end on the lab: the real huggingface_hub client on the nodes against
the lab hub (lab/hub, on the controller at 198.18.0.1:8090), real rsync over ssh between
the nodes' link addresses, real page files on each node's disk.

What is asserted is what an operator sees: the hub's request log (each file fetched
once in mirror mode), the bytes on each node (hashed with sha256sum on the node, not
with our code), play output lines, the glm53_weights fact, and failure messages.

Cost: downloads and copies of the lab hub's repos between the nodes, with the hub's uplink limited."""

from __future__ import annotations

import json
import re
import shlex
import sys
import urllib.request
from pathlib import Path

import pytest

import lab_faults
from lab_faults import HEAD, WORKER, sh

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab" / "hub"))
import repos as hub_repos  # noqa: E402  pylint: disable=wrong-import-position

PLAYBOOK = "playbooks/hf_weights.yml"
HUB = "http://198.18.0.1:8090"
TR3 = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
TR3_REV = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"
DFLASH = "incoai/GLM-5.3-Flash-DFlash2"
HF = "/home/spark/.cache/huggingface"
PUBLISH = "Publish glm53_weights"


def hub(path: str, payload: dict | None = None):
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(HUB + path, data=data, method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def hub_log() -> list[dict]:
    log = hub("/_lab/requests")
    return log["requests"] if isinstance(log, dict) else log


def file_gets(log: list[dict], repo: str | None = None) -> list[dict]:
    """GETs of file contents (resolve), the requests that move weight bytes."""
    return [e for e in log if e.get("method") == "GET" and "/resolve/" in (e.get("path") or "")
            and (repo is None or e.get("repo") == repo)]


def wipe(*nodes):
    for node in nodes:
        sh(node, f"rm -rf {HF}/hub", user="spark")


def tree_sums(node: str, repo: str, revision: str) -> dict[str, str]:
    """{file: sha256} of a snapshot as the node's own sha256sum reads it (links followed)."""
    snap = f"{HF}/hub/models--{repo.replace('/', '--')}/snapshots/{revision}"
    out = sh(node, f"cd {shlex.quote(snap)} && find -L . -type f -print0 | sort -z | xargs -0 sha256sum",
             user="spark").stdout
    return {line.split(None, 1)[1].strip(): line.split()[0] for line in out.splitlines()}


def flat(text: str) -> str:
    """Play output with the YAML callback's line folding undone."""
    return re.sub(r"\s+", " ", text)


def weights_fact(run, host):
    return run.task_results(PUBLISH)[host]["ansible_facts"]["glm53_weights"]


@pytest.fixture(scope="module", autouse=True)
def preflighted(lab):
    from conftest import PlaybookRunner  # pylint: disable=import-outside-toplevel
    PlaybookRunner(Path(lab.inventory), "hf_weights-preflight")("playbooks/preflight.yml",
                                                                extravars={"path": "tensorfold"})
    hub("/_lab/reset", {})
    yield
    hub("/_lab/reset", {})


@pytest.fixture
def fresh():
    wipe(HEAD, WORKER)
    hub("/_lab/reset", {})
    yield
    hub("/_lab/reset", {})


@pytest.fixture
def hub_clean():
    """The hub's log and faults cleared, the nodes' weights as the previous test left them: for
    a test that converges first anyway (after a test that converged, that run fetches nothing)."""
    hub("/_lab/reset", {})
    yield
    hub("/_lab/reset", {})


def test_mirror_fetches_each_file_once_then_a_rerun_changes_and_fetches_nothing(run_playbook, fresh):
    hub("/_lab/faults", {"rate_bps": 40_000_000})  # slow enough to see progress lines
    first = run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "hf_weights_progress_interval": 1})
    gets = file_gets(hub_log())
    names = [e["file"] for e in gets if e.get("status") in (200, 206)]
    expected = sorted(f.name for f in hub_repos.catalog()[TR3].files)
    assert sorted(names) == expected, names  # each file once, though two nodes hold it
    assert not [e for e in hub_log() if e.get("repo") == DFLASH], "the drafter was fetched without acceptance"
    assert tree_sums(HEAD, TR3, TR3_REV) == tree_sums(WORKER, TR3, TR3_REV)
    assert len(tree_sums(WORKER, TR3, TR3_REV)) == len(set(names))
    # Progress while downloading, the copy's rate, and the drafter decision said once.
    out = flat(first.stdout)
    assert re.search(r"\[spark-head\] download %s.*of .*B \(\d+%%\)" % re.escape(TR3), out), out[-3000:]
    assert re.search(r"spark-head -> spark-worker: \d+ bytes in [\d.]+ s over \d+ streams \([\d.]+ MB/s\)", out)
    assert out.count("Drafter not downloaded: incoai/GLM-5.3-Flash-DFlash2 (CC BY-NC-ND 4.0)") == 1
    for host in (HEAD, WORKER):
        fact = weights_fact(first, host)
        assert fact["model_path"] == f"/root/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/snapshots/{TR3_REV}"
        assert fact["drafter_path"] == "" and fact["drafter_refused"] == [DFLASH]
        assert fact["hf_cache_dir"] == HF

    hub("/_lab/reset", {})
    again = run_playbook(PLAYBOOK, extravars={"path": "tensorfold"}, ident="mirror-rerun")
    assert again.changed_total == 0
    assert file_gets(hub_log()) == []
    assert weights_fact(again, WORKER)["model_path"] == weights_fact(first, WORKER)["model_path"]


def test_download_mode_fetches_on_every_node(run_playbook, fresh):
    run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "hf_weights_distribution": "download"})
    names = [e["file"] for e in file_gets(hub_log(), TR3) if e.get("status") in (200, 206)]
    assert names and all(names.count(n) == 2 for n in set(names)), names
    assert tree_sums(HEAD, TR3, TR3_REV) == tree_sums(WORKER, TR3, TR3_REV)


def test_an_interrupted_download_resumes_and_is_never_reported_complete_while_short(run_playbook, fresh):
    victim = "model-00002-of-00003.safetensors"
    manifest = f"{HF}/hub/models--{TR3.replace('/', '--')}/.glm53/{TR3_REV}.json"
    # Every response for the file past 20 MiB is cut, resumes included: the client's retries
    # make no progress, so the run must fail, and nothing may call the short file complete.
    hub("/_lab/faults", {"drop": {victim: {"after_bytes": 20 * 1024 * 1024, "times": None}}})
    first = run_playbook(PLAYBOOK, extravars={"path": "tensorfold"}, expect_success=False)
    first.assert_failed()
    assert sh(HEAD, f"test -e {manifest}", check=False, user="spark").returncode != 0
    assert re.search(r"rerun|resum|interrupt|connection", flat(first.stdout), re.I), first.stdout[-2000:]
    # One cut only: the client resumes within the run with a Range request past the cut.
    hub("/_lab/reset", {})
    hub("/_lab/faults", {"drop": {victim: {"after_bytes": 20 * 1024 * 1024, "times": 1}}})
    run_playbook(PLAYBOOK, extravars={"path": "tensorfold"}, ident="resume")
    ranged = [e for e in file_gets(hub_log(), TR3) if e.get("file") == victim and e.get("range")]
    assert [e["range"] for e in ranged] == [f"bytes={20 * 1024 * 1024}-"], ranged
    assert sh(HEAD, f"test -e {manifest}", check=False, user="spark").returncode == 0
    assert tree_sums(HEAD, TR3, TR3_REV) == tree_sums(WORKER, TR3, TR3_REV)


def test_corrupt_files_on_the_worker_are_detected_and_repaired_from_the_head(run_playbook, hub_clean):
    run_playbook(PLAYBOOK, extravars={"path": "tensorfold"})  # converged weights on both nodes to corrupt
    good = tree_sums(HEAD, TR3, TR3_REV)
    snap = f"{HF}/hub/models--{TR3.replace('/', '--')}/snapshots/{TR3_REV}"
    hub("/_lab/reset", {})
    # Truncated: the size check finds it.
    sh(WORKER, f"truncate -s 1000000 \"$(readlink -f {snap}/model-00001-of-00003.safetensors)\"", user="spark")
    fixed = run_playbook(PLAYBOOK, extravars={"path": "tensorfold"}, ident="truncated")
    assert fixed.changed_total > 0 and tree_sums(WORKER, TR3, TR3_REV) == good
    # Same size, flipped bytes, same mtime: only sha256 finds it, and rsync must not skip it.
    blob = sh(WORKER, f"readlink -f {snap}/model-00003-of-00003.safetensors", user="spark").stdout.strip()
    sh(WORKER, f"t=$(stat -c %y {blob}); printf 'XXXX' | dd of={blob} bs=1 seek=4096 conv=notrunc status=none; "
               f"touch -d \"$t\" {blob}", user="spark")
    run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "hf_weights_verify": "sha256"}, ident="flipped")
    assert tree_sums(WORKER, TR3, TR3_REV) == good
    assert file_gets(hub_log()) == [], "repairs come from the head, not the hub"


@pytest.mark.parametrize("revision, says", [
    ("main", "revision must be a full 40-hex commit sha, found 'main'"),
    ("5ab363a8dcf6405955fd5f99671e01a1c9fb124", "revision must be a full 40-hex commit sha, found '5ab363a8"),
])
def test_a_revision_that_is_not_a_full_sha_fails_before_any_request(run_playbook, fresh, revision, says):
    models = {"tensorfold": [{"repo_id": TR3, "revision": revision}]}
    run = run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "glm53_models": models}, expect_success=False)
    run.assert_failed()
    assert says in flat(run.stdout) and "hf_weights_models" in run.stdout
    assert hub_log() == []
    assert sh(HEAD, f"test -e {HF}/hub", check=False).returncode != 0


def test_an_unknown_repo_fails_with_the_hubs_answer_and_changes_nothing(run_playbook, fresh):
    models = {"tensorfold": [{"repo_id": "glm53-lab/no-such-model", "revision": "0" * 40}]}
    run = run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "glm53_models": models}, expect_success=False)
    run.assert_failed()
    assert "glm53-lab/no-such-model" in run.stdout and "RepoNotFound" in flat(run.stdout)
    assert file_gets(hub_log()) == []
    assert "Traceback" not in run.stdout


def test_an_accepted_drafter_is_fetched_and_published(run_playbook, fresh):
    run = run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "hf_weights_accept_noncommercial_drafter": True})
    assert file_gets(hub_log(), DFLASH)
    assert "Drafter not downloaded" not in run.stdout
    fact = weights_fact(run, WORKER)
    assert fact["drafter"] is True
    assert fact["drafter_path"].startswith("/root/.cache/huggingface/hub/models--incoai--GLM-5.3-Flash-DFlash2/snapshots/")


def test_a_worker_short_of_space_is_refused_before_any_download(run_playbook, fresh):
    with lab_faults.small_disk(WORKER, HF, 64 * 1024 * 1024):
        run = run_playbook(PLAYBOOK, extravars={"path": "tensorfold"}, expect_success=False)
    run.assert_failed()
    assert re.search(r"\[hf_weights\.space\] spark-worker: spark-worker needs [\d.]+ GB more on \S+ for checkpoint", flat(run.stdout))
    assert "Nothing was downloaded" in flat(run.stdout)
    assert file_gets(hub_log()) == []


def test_a_token_reaches_no_artifact_output_or_file(run_playbook, fresh):
    gated, token = hub_repos.GATED, hub_repos.GATED_TOKEN
    revision = hub_repos.PINNED[gated]
    models = {"tensorfold": [{"repo_id": gated, "revision": revision}]}
    refused = run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "glm53_models": models}, expect_success=False)
    refused.assert_failed()
    assert "gated" in refused.stdout and "hf_weights_token" in flat(refused.stdout)
    run = run_playbook(PLAYBOOK, extravars={"path": "tensorfold", "glm53_models": models},
                       secret_vars={"hf_weights_token": token}, verbosity=3)
    assert file_gets(hub_log(), gated)
    # Everything ansible-runner kept, except env/extravars: the operator's own secrets file.
    leaks = [str(p) for p in run.artifact_dir.parent.parent.rglob("*") if p.is_file()
             and p != run.artifact_dir.parent.parent / "env" / "extravars" and token.encode() in p.read_bytes()]
    assert leaks == [], leaks
    for node in (HEAD, WORKER):
        found = sh(node, f"grep -rl --binary-files=text {shlex.quote(token)} /home/spark /tmp 2>/dev/null || true").stdout
        assert found.strip() == "", f"{node}: {found}"
