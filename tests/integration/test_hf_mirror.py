"""hf_mirror end to end on the Spark lab: the head copies a verified snapshot to the worker
over the link (spark@198.18.1.11), with the head's own ssh key as the preflight uses it.

The snapshot is fake but laid out as huggingface_hub lays it out (two 16 MiB blobs, relative
snapshot links, the manifest hf_snapshot writes) in spark@spark-head's cache, under a repo
id of its own that is removed from both nodes afterwards. What the worker holds is read on
the worker with sha256sum and readlink as `spark`, never from the module's figures.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid

import pytest

import lab_faults
from lab_faults import HEAD, WORKER

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import cmdline, descendants

PLAYBOOK = "tests/integration/hf_mirror/mirror.yml"
TASK = "Mirror"
TARGET = "spark@198.18.1.11"  # spark-worker's address on the first CX7 link
HOME = "/home/spark"
REVISION = "0123456789abcdef0123456789abcdef01234567"
MIB = 1 << 20

MAKE_SNAPSHOT = r"""
import hashlib, json, os, sys
repo_id, revision, home = sys.argv[1:4]
repo = os.path.join(home, ".cache/huggingface/hub", "models--" + repo_id.replace("/", "--"))
rows = []
for name in ("model-00001-of-00002.safetensors", "shards/model-00002-of-00002.safetensors"):
    data = os.urandom(16 << 20)
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    with open(os.path.join(repo, "blobs", digest), "wb") as handle:
        handle.write(data)
    link = os.path.join(repo, "snapshots", revision, name)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(os.path.join(repo, "blobs", digest), os.path.dirname(link)), link)
    rows.append({"name": name, "size": len(data), "sha256": digest, "lfs": True})
os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
with open(os.path.join(repo, "refs", "main"), "w") as handle:
    handle.write(revision)
os.makedirs(os.path.join(repo, ".glm53"), exist_ok=True)
with open(os.path.join(repo, ".glm53", revision + ".json"), "w") as handle:
    json.dump({"schema": 1, "repo_id": repo_id, "revision": revision, "files": rows,
               "bytes": sum(r["size"] for r in rows), "verified_with": "sha256"}, handle, indent=1, sort_keys=True)
"""

# Every file under the repo folder, as `f path sha256` or `l path target`, sorted.
LIST_REPO = ("cd %s && { find . -type f -exec sha256sum {} + | awk '{print \"f \" $2 \" \" $1}';"
             " find . -type l -printf 'l %%p %%l\\n'; } | sort")


def as_spark(node: str, script: str, check: bool = True):
    return lab_faults.sh(node, script, user="spark", check=check)


def listing(node: str, repo_dir: str) -> list[str]:
    return as_spark(node, LIST_REPO % repo_dir).stdout.splitlines()


@pytest.fixture
def snapshot(lab):
    """A verified fake snapshot on the head; removed from both nodes afterwards."""
    repo_id = "glm53-test/mirror-" + uuid.uuid4().hex[:8]
    folder = "models--" + repo_id.replace("/", "--")
    as_spark(HEAD, "python3 - %s %s %s <<'EOF'\n%s\nEOF" % (repo_id, REVISION, HOME, MAKE_SNAPSHOT))
    head_repo = f"{HOME}/.cache/huggingface/hub/{folder}"
    progress = f"{HOME}/.cache/glm53-test-mirror-{folder}.json"
    yield {"repo_id": repo_id, "folder": folder, "head_repo": head_repo, "progress": progress,
           "vars": {"mirror_models": [{"repo_id": repo_id, "revision": REVISION}], "mirror_target": TARGET}}
    as_spark(HEAD, f"rm -rf {head_repo} {progress}")
    as_spark(WORKER, f"rm -rf {HOME}/.cache/huggingface/hub/{folder}")


def mirror(run_playbook, extravars, ident, expect_success=True, check=False) -> dict:
    result = run_playbook(PLAYBOOK, extravars=extravars, ident=ident, expect_success=expect_success,
                          cmdline="--check" if check else None)
    return result.task_results(TASK)[HEAD]


def test_head_copies_the_snapshot_to_the_worker_over_the_link(run_playbook, snapshot):
    extravars = dict(snapshot["vars"], mirror_progress_file=snapshot["progress"])
    worker_repo = f"{HOME}/.cache/huggingface/hub/{snapshot['folder']}"
    manifest_size = int(as_spark(HEAD, f"stat -c %s {snapshot['head_repo']}/.glm53/{REVISION}.json").stdout)
    checked = mirror(run_playbook, extravars, "hf-mirror-check", check=True)
    assert checked["changed"] is True and checked["bytes_copied"] == 32 * MIB + manifest_size, checked
    assert as_spark(WORKER, f"test -e {worker_repo}", check=False).returncode != 0
    assert as_spark(HEAD, f"test -e {snapshot['progress']}", check=False).returncode != 0

    first = mirror(run_playbook, extravars, "hf-mirror-first")
    head_files = [line for line in listing(HEAD, snapshot["head_repo"]) if not line.startswith("f ./refs/")]
    assert listing(WORKER, worker_repo) == head_files
    links = [line for line in head_files if line.startswith("l ")]
    assert len(links) == 2 and all(" ../../" in line for line in links), links  # relative, into blobs/
    assert first["changed"] is True
    assert first["bytes_copied"] == first["bytes_total"] == 32 * MIB + manifest_size
    assert first["streams"] == 2 and first["files_copied"] == 3 and first["rate_bps"] > 0
    assert first["destination"] == TARGET + ":.cache/huggingface/hub/"
    assert all("-e" in argv and not any(arg == "-z" or arg.startswith("--compress") for arg in argv)
               for argv in first["commands"])
    progress = json.loads(as_spark(HEAD, f"cat {snapshot['progress']}").stdout)
    assert progress["phase"] == "done" and progress["bytes_done"] == progress["bytes_total"] == first["bytes_total"]

    second = mirror(run_playbook, snapshot["vars"], "hf-mirror-rerun")
    assert second["changed"] is False and second["bytes_copied"] == 0 and second["streams"] == 0, second

    # A same-size corrupt blob on the worker is re-sent only when forced.
    blob = as_spark(WORKER, f"readlink -f {worker_repo}/snapshots/{REVISION}/model-00001-of-00002.safetensors").stdout
    blob = blob.strip()
    as_spark(WORKER, f"t=$(stat -c %Y {blob}); printf 'XXXX' | dd of={blob} bs=1 seek=4096 conv=notrunc status=none;"
                     f" touch -d @$t {blob}")
    assert listing(WORKER, worker_repo) != head_files
    forced = mirror(run_playbook, dict(snapshot["vars"], mirror_force=[
        {"repo_id": snapshot["repo_id"], "name": "model-00001-of-00002.safetensors"}]), "hf-mirror-force")
    assert forced["changed"] is True and forced["bytes_copied"] == 16 * MIB, forced
    assert listing(WORKER, worker_repo) == head_files


def test_rsync_missing_on_the_worker_is_named(run_playbook, snapshot):
    with lab_faults.hide_command(WORKER, "rsync"):
        result = mirror(run_playbook, snapshot["vars"], "hf-mirror-no-rsync", expect_success=False)
    assert result["_event"] == "runner_on_failed"
    msg = result["msg"]
    assert msg.startswith(f"copying to {TARGET} failed (exit "), msg
    assert f"rsync is missing on the worker {TARGET}: install rsync (apt install rsync)" in msg, msg
    assert "Command: " in msg


def test_a_worker_refusing_the_head_key_is_named(run_playbook, snapshot):
    with lab_faults.break_worker_ssh(WORKER):
        result = mirror(run_playbook, snapshot["vars"], "hf-mirror-no-key", expect_success=False)
    msg = result["msg"]
    assert msg.startswith(f"copying to {TARGET} failed (exit "), msg
    assert "the worker refused the head's ssh key" in msg, msg


def test_a_full_worker_disk_reports_the_free_bytes(run_playbook, snapshot):
    dest = f"{HOME}/glm53-test-small-cache"
    with lab_faults.small_disk(WORKER, dest, 8 * MIB):
        result = mirror(run_playbook, dict(snapshot["vars"], mirror_dest=dest), "hf-mirror-full",
                        expect_success=False)
    msg = result["msg"]
    assert msg.startswith(f"copying to {TARGET} failed (exit "), msg
    assert "the worker's disk under the destination is full (" in msg, msg
    assert "bytes free there now, this copy sends %d bytes)" % (32 * MIB) in msg, msg
    # Two streams of one 16 MiB file each: neither fits in 8 MiB, so both fail, every time.
    assert "(2 of 2 streams failed; the first is shown)" in msg and msg.count("Command: ") == 1, msg


LINK = "enp1s0f1np1"  # the worker's netdev of 198.18.1.11 (lab/README.md)


def _when_copying(worker_repo: str, action, seconds: float = 90) -> threading.Thread:
    """Run `action()` in a thread once the worker holds some bytes of a blob and a stream rsync
    (given --bwlimit) runs on the head; `action` gets that rsync's parent, the module."""
    def watch():
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sent = as_spark(WORKER, f"find {worker_repo}/blobs -type f -size +0 2>/dev/null | head -1",
                            check=False).stdout.strip()
            stream = "r=$(pgrep -u spark -f -- '--bwlimit=' | head -1); [ -n \"$r\" ] && ps -o ppid= -p $r"
            module = as_spark(HEAD, stream, check=False).stdout.strip()
            if sent and module:
                action(int(module))
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _rsync_pids(node: str) -> str:
    return as_spark(node, "pgrep -u spark -x rsync", check=False).stdout.strip()


def _until_no_rsync(seconds: float) -> dict:
    """{node: pids} of spark's rsync processes still running after up to `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        left = {node: _rsync_pids(node) for node in (HEAD, WORKER)}
        if not any(left.values()) or time.monotonic() >= deadline:
            return {node: pids for node, pids in left.items() if pids}
        time.sleep(0.5)


def _kill_the_play(ident: str) -> int:
    """SIGKILL the ansible-playbook of this test's run (ansible-runner starts it in a session of
    its own) with its whole process group, as Ctrl-C reaches the foreground group. Its pid."""
    for pid in descendants(os.getpid()):
        args = cmdline(pid)
        if any(arg.endswith("ansible-playbook") for arg in args) and any(ident in arg for arg in args):
            group = os.getpgid(pid)
            assert group != os.getpgid(0)
            os.killpg(group, signal.SIGKILL)
            return pid
    raise AssertionError("no ansible-playbook of %s under this test" % ident)


@pytest.mark.parametrize("killed", ["module", "play"])
def test_a_killed_copy_leaves_no_writer_and_the_rerun_completes(run_playbook, snapshot, killed):
    """module: the module on the head gets SIGKILL, as from Ansible's async limit; its rsyncs die with
    it. play: the controller dies, the module on the head copies on; the rerun ends it first."""
    worker_repo = f"{HOME}/.cache/huggingface/hub/{snapshot['folder']}"
    ident = f"hf-mirror-killed-{killed}"
    modules = []

    def kill(module: int) -> None:
        modules.append(module)
        if killed == "module":
            lab_faults.sh(HEAD, f"kill -KILL {module}")
        else:
            _kill_the_play(ident)

    # 32 MiB at 2 MiB/s: about 16 s, killed within the first seconds.
    watcher = _when_copying(worker_repo, kill)
    result = run_playbook(PLAYBOOK, extravars=dict(snapshot["vars"], mirror_bwlimit=2048), ident=ident,
                          expect_success=False)
    watcher.join()
    assert modules, "the copy was never seen running on the head"
    assert result.status != "successful"
    if killed == "module":
        # No writer left on either node: the head's rsyncs died with the module, the worker's with their ssh.
        assert _until_no_rsync(10) == {}
    else:
        time.sleep(2)
        running = lab_faults.sh(HEAD, f"ps -o pid= -p {modules[0]}", check=False).stdout.strip()
        assert running and _rsync_pids(HEAD), "the module no longer ran on the head after the play was killed"

    again = mirror(run_playbook, snapshot["vars"], f"{ident}-rerun")
    assert again["changed"] is True, again
    assert [w["pid"] for w in again["ended_writers"]][:1] == ([] if killed == "module" else modules), again
    assert _until_no_rsync(10) == {}
    head_files = [line for line in listing(HEAD, snapshot["head_repo"]) if not line.startswith("f ./refs/")]
    assert listing(WORKER, worker_repo) == head_files
    again = mirror(run_playbook, snapshot["vars"], f"{ident}-again")
    assert again["changed"] is False and again["bytes_copied"] == 0, again


def test_a_dead_link_fails_the_copy_within_a_minute_naming_the_worker_and_its_address(run_playbook, snapshot):
    worker_repo = f"{HOME}/.cache/huggingface/hub/{snapshot['folder']}"
    fault = lab_faults.link_down(WORKER, LINK)
    downed = []

    def pull_the_cable(_module: int) -> None:
        fault.__enter__()  # pylint: disable=unnecessary-dunder-call  # applied mid-copy, undone below
        downed.append(time.monotonic())

    # 32 MiB at 1 MiB/s: about 32 s, cut within the first seconds. io_timeout 10 s (the module
    # default is 30): the bound below is what that timeout promises, whatever the default.
    io_timeout = 10
    watcher = _when_copying(worker_repo, pull_the_cable)
    try:
        result = run_playbook(PLAYBOOK, extravars=dict(snapshot["vars"], mirror_bwlimit=1024, mirror_node=WORKER,
                                                       mirror_io_timeout=io_timeout),
                              ident="hf-mirror-link-down", expect_success=False)
        ended = time.monotonic()
        watcher.join()
    finally:
        fault.undo()
    assert downed, "the copy was never seen running on the head"
    # rsync --timeout and ssh's keepalive (3 missed at io_timeout / 3) each end it after about
    # io_timeout; twice that, plus the play's own end (the module's return, ansible's exit).
    assert ended - downed[0] < 2 * io_timeout + 25, ended - downed[0]
    res = result.task_results(TASK)[HEAD]
    assert res["_event"] == "runner_on_failed"
    msg = res["msg"]
    assert msg.startswith(f"copying to {WORKER} ({TARGET}) failed (exit "), msg
    assert f"the link to 198.18.1.11 is down or the worker {WORKER} ({TARGET}) stopped answering" in msg, msg
    # The worker's rsync ends by its own --timeout once the link is back.
    assert _until_no_rsync(io_timeout + 35) == {}
