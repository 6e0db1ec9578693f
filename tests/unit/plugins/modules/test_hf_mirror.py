"""dgx_spark.glm53.hf_mirror run as a real module by ``ansible`` (ad hoc, local), copying a
fake Hugging Face cache with the real rsync to a local destination (``target: ''``).

What the worker holds is read here with hf_cache.tree (sha256 of every file, links as
they are), never with the module's own figures."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.modules import hf_mirror
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import (
    REVISION,
    folder,
    make_snapshot,
    need_rsync,
    sha256_file,
    tree,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.dirname(sys.executable)
TARGET_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODULE = "dgx_spark.glm53.hf_mirror"
ANSIBLE_KEYS = {"_ansible_no_log", "action", "invocation", "changed", "failed", "warnings", "deprecations", "msg"}
MIB = 1 << 20
DRAFTER_REVISION = "7d74cdd8" + "1" * 32


def run_module(args, check=False, module=MODULE, background=False, path=None):
    """Run the module through ansible with the JSON callback; return (exit code, the host's result),
    or the Popen with ``background`` (read it with ``parse``). ``path`` goes first in PATH."""
    command = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, "-m", module, "-a", json.dumps(args)]
    if check:
        command.append("--check")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    if path:
        env["PATH"] = path + os.pathsep + env.get("PATH", "")
    if background:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = ansiballz.run(command, cwd=REPO, env=env, timeout=300)
    return parse(proc.returncode, proc.stdout, proc.stderr)


def parse(returncode, stdout, stderr):
    try:
        report = json.loads(stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc %d): %s %s" % (returncode, stdout, stderr))
    return returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture
def cache(tmp_path):
    """A head cache with two snapshots (a model with a file in a subfolder, and a drafter) and
    an empty place for the worker's cache."""
    need_rsync()
    head = tmp_path / "head"
    docs = [
        make_snapshot(head, files={"model-00001-of-00002.safetensors": os.urandom(4 * MIB),
                                   "model-00002-of-00002.safetensors": os.urandom(3 * MIB),
                                   "config.json": b'{"model_type": "glm"}\n',
                                   "original/tokenizer.json": os.urandom(5000)}),
        make_snapshot(head, repo_id="incoai/drafter", revision=DRAFTER_REVISION,
                      files={"drafter.safetensors": os.urandom(2 * MIB)}),
    ]
    return {"head": head, "worker": tmp_path / "worker" / "hf", "docs": docs, "tmp": tmp_path}


def args_for(cache, **over):
    args = {"models": [{"repo_id": d["repo_id"], "revision": d["revision"]} for d in cache["docs"]],
            "cache_dir": str(cache["head"]), "dest": str(cache["worker"]), "target": "",
            "progress_file": str(cache["tmp"] / "state" / "progress-mirror.json")}
    args.update(over)
    return args


def expected_tree(cache):
    """What the worker must hold: the head's hub without refs/ and without the locks folder
    (huggingface_hub's .locks, where the module also records its rsync processes)."""
    return dict((path, entry) for path, entry in tree(cache["head"] / "hub").items()
                if "/refs/" not in path and not path.startswith(".locks/"))


def bytes_on_head(cache):
    """Distinct blobs and manifests on the head, by size on disk."""
    return sum(entry[2] for path, entry in expected_tree(cache).items() if entry[0] == "file")


def blob_path(cache, doc, name):
    sha = [row["sha256"] for row in doc["files"] if row["name"] == name][0]
    return os.path.join(folder(doc["repo_id"]), "blobs", sha)


def test_copy_keeps_the_bytes_and_the_relative_links(cache):
    rc, result = run_module(args_for(cache, streams=2))
    assert rc == 0, result
    assert result["changed"] is True
    worker_hub = cache["worker"] / "hub"
    assert tree(worker_hub) == expected_tree(cache)
    for doc in cache["docs"]:
        for row in doc["files"]:
            link = worker_hub / folder(doc["repo_id"]) / "snapshots" / doc["revision"] / row["name"]
            assert link.is_symlink() and not os.path.isabs(os.readlink(str(link)))
            assert sha256_file(str(link)) == row["sha256"]
    total = bytes_on_head(cache)
    assert result["bytes_copied"] == result["bytes_total"] == total
    assert result["files"] == result["files_copied"] == 7  # 5 blobs and 2 manifests
    assert result["links"] == result["snapshot_files"] == 5
    assert result["streams"] == 2
    assert result["destination"] == str(worker_hub) + "/"
    assert all("-z" not in argv and "--compress" not in argv for argv in result["commands"])
    progress = json.loads((cache["tmp"] / "state" / "progress-mirror.json").read_text())
    assert progress["phase"] == "done" and progress["bytes_done"] == progress["bytes_total"] == total
    assert progress["files_done"] == progress["files_total"] == 7
    documented = yaml.safe_load(hf_mirror.RETURN)
    assert set(result) - ANSIBLE_KEYS == set(documented), result


def test_rerun_copies_nothing(cache):
    assert run_module(args_for(cache))[0] == 0
    before = tree(cache["worker"] / "hub")
    rc, result = run_module(args_for(cache))
    assert rc == 0, result
    assert result["changed"] is False
    assert result["bytes_copied"] == 0 and result["files_copied"] == 0 and result["streams"] == 0
    assert result["items_changed"] == 0
    assert tree(cache["worker"] / "hub") == before


def test_only_what_the_worker_lacks_is_sent(cache):
    doc = cache["docs"][0]
    present = blob_path(cache, doc, "model-00001-of-00002.safetensors")
    os.makedirs(str((cache["worker"] / "hub" / present).parent))
    shutil.copy2(str(cache["head"] / "hub" / present), str(cache["worker"] / "hub" / present))
    rc, result = run_module(args_for(cache))
    assert rc == 0, result
    assert result["bytes_copied"] == bytes_on_head(cache) - 4 * MIB
    assert tree(cache["worker"] / "hub") == expected_tree(cache)


def test_force_resends_a_corrupt_file_of_the_right_size(cache):
    assert run_module(args_for(cache))[0] == 0
    doc = cache["docs"][0]
    name = "model-00002-of-00002.safetensors"
    worker_blob = str(cache["worker"] / "hub" / blob_path(cache, doc, name))
    info = os.stat(worker_blob)
    with open(worker_blob, "r+b") as handle:
        handle.seek(MIB)
        handle.write(b"\0" * 16)
    os.utime(worker_blob, ns=(info.st_atime_ns, info.st_mtime_ns))
    expected = [row["sha256"] for row in doc["files"] if row["name"] == name][0]
    # Size and time match: without force, rsync keeps the corrupt copy.
    rc, result = run_module(args_for(cache))
    assert rc == 0 and result["changed"] is False, result
    assert sha256_file(worker_blob) != expected
    rc, result = run_module(args_for(cache, force=[{"repo_id": doc["repo_id"], "name": name}]))
    assert rc == 0, result
    assert result["changed"] is True and result["bytes_copied"] == 3 * MIB, result
    assert sha256_file(worker_blob) == expected
    assert sum("--ignore-times" in argv for argv in result["commands"]) == 1


def test_missing_manifest_fails_naming_the_snapshot(cache):
    make_snapshot(cache["head"], repo_id="org/unverified", manifest=False)
    args = args_for(cache)
    args["models"].append({"repo_id": "org/unverified", "revision": REVISION})
    rc, result = run_module(args)
    assert rc != 0 and result["failed"] is True
    assert result["msg"].startswith("no verified snapshot of org/unverified@%s on the head" % REVISION), result
    assert result["msg"].endswith("run hf_snapshot there first")
    assert "Traceback" not in json.dumps(result)
    assert not cache["worker"].exists()


def test_check_mode_reports_and_copies_nothing(cache):
    rc, result = run_module(args_for(cache), check=True)
    assert rc == 0, result
    assert result["changed"] is True
    assert result["bytes_copied"] == bytes_on_head(cache) and result["files_copied"] == 7
    assert all("--dry-run" in argv for argv in result["commands"])
    assert not cache["worker"].exists()
    assert not (cache["tmp"] / "state").exists()
    assert run_module(args_for(cache))[0] == 0
    rc, result = run_module(args_for(cache), check=True)
    assert rc == 0 and result["changed"] is False and result["bytes_copied"] == 0, result


def test_an_unreachable_worker_fails_naming_it_the_command_and_the_fix(cache):
    if not shutil.which("ssh"):
        pytest.fail("this test runs the OpenSSH client: install openssh-client")
    # Port 1 on this machine refuses at once: a real ssh failure, no network needed.
    rc, result = run_module(args_for(cache, target="spark@127.0.0.1", dest="~/.cache/huggingface",
                                     ssh_options=["-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-p", "1"]))
    assert rc != 0 and result["failed"] is True
    msg = result["msg"]
    # rsync exits 255 (ssh's status) or 12 (its own view of the closed connection), whichever it sees first.
    assert re.match(r"copying to spark@127\.0\.0\.1 failed \(exit (255: ssh failed|12: error in the rsync protocol)",
                    msg), msg
    assert "the head cannot ssh to spark@127.0.0.1" in msg and "Connection refused" in msg
    assert "Command: " in msg and "spark@127.0.0.1:.cache/huggingface/hub/" in msg


def test_bad_options_fail_before_anything_runs(cache):
    rc, result = run_module(args_for(cache, streams=0, dest="relative/dir"))
    assert rc != 0
    assert "streams must be between 1 and 16, got 0" in result["msg"]
    assert "dest must be an absolute path or start with ~/" in result["msg"]


def to_shared_store(hub_dir, docs):
    """Lay the head's blobs out as huggingface_hub 2.4 leaves a Xet download, with its own
    function: the bytes in the shared store <hub>/blobs/<xx>/<hash>, blobs/<etag> a relative
    link there. Returns {repo blob path: store path}."""
    from huggingface_hub.utils._shared_blobs import (  # pylint: disable=import-outside-toplevel
        publish_blob_to_shared_store, shared_blob_path)
    moved = {}
    for doc in docs:
        for row in doc["files"]:
            blob = os.path.join(str(hub_dir), folder(doc["repo_id"]), "blobs", row["sha256"])
            # A stand-in Xet hash: 64 hex, not the sha256 (the store names files by their Xet hash).
            xet = hashlib.sha256(b"xet\0" + row["sha256"].encode()).hexdigest()
            assert publish_blob_to_shared_store(blob_path=blob, xet_hash=xet, cache_dir=str(hub_dir),
                                                expected_size=row["size"])
            moved[blob] = str(shared_blob_path(str(hub_dir), xet))
    return moved


def test_blobs_in_the_shared_store_reach_the_worker_as_bytes_that_verify_offline(cache):
    moved = to_shared_store(cache["head"] / "hub", cache["docs"])
    for blob, store in moved.items():  # the layout under test, as the library wrote it
        assert os.path.islink(blob) and not os.path.isabs(os.readlink(blob)) and os.path.realpath(blob) == store
    # The worker already holds what `rsync -a` made of the first model: links to a store it lacks.
    first = folder(cache["docs"][0]["repo_id"])
    shutil.copytree(str(cache["head"] / "hub" / first), str(cache["worker"] / "hub" / first), symlinks=True)
    rc, result = run_module(args_for(cache))
    assert rc == 0, result
    worker_hub = cache["worker"] / "hub"
    held = tree(worker_hub)
    for doc in cache["docs"]:
        for row in doc["files"]:
            assert held[blob_path(cache, doc, row["name"])] == ("file", row["sha256"], row["size"])
            link = "%s/snapshots/%s/%s" % (folder(doc["repo_id"]), doc["revision"], row["name"])
            assert held[link] == ("link", os.readlink(str(cache["head"] / "hub" / link)))
    assert not any(path.startswith("blobs/") for path in held)  # no store on the worker
    for doc in cache["docs"]:
        rc, verified = run_module({"repo_id": doc["repo_id"], "revision": doc["revision"],
                                   "cache_dir": str(cache["worker"]), "offline": True, "verify": "sha256"},
                                  module="dgx_spark.glm53.hf_snapshot")
        assert rc == 0 and verified["verified"] is True, verified
    rc, again = run_module(args_for(cache))
    assert rc == 0 and again["changed"] is False and again["bytes_copied"] == 0, again
