"""spark_node_facts helpers on real files: the disk need counts only the pinned revisions'
blobs (each inode once), and GPU processes are matched to containers by their cgroup."""

import os
import subprocess

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _node_facts as nf
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_probe import parse_docker_ps

OURS = {"repo_id": "org/ours", "revision": "a" * 40}
MIB = 1 << 20


def write(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(os.urandom(size))


def snapshot(cache, repo_id, revision, files):
    """An HF hub layout: blobs/<name>, snapshots/<revision>/<file> -> ../../blobs/<name>."""
    repo = os.path.join(cache, "hub", "models--" + repo_id.replace("/", "--"))
    for name, size in files.items():
        write(os.path.join(repo, "blobs", name), size)
        link = os.path.join(repo, "snapshots", revision, name + ".safetensors")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.join("..", "..", "blobs", name), link)
    return repo


def allocated(path):
    """Allocated bytes as stat(1) reports them (an independent measurement)."""
    return int(subprocess.run(["stat", "-L", "-c", "%b %B", path], capture_output=True, text=True, check=True)
               .stdout.split()[0]) * 512


def test_model_bytes_counts_only_the_pinned_revision_of_our_repos(tmp_path):
    cache = str(tmp_path)
    ours = snapshot(cache, "org/ours", "a" * 40, {"b1": 3 * MIB, "b2": 1 * MIB})
    # The same repo at another revision, and another model: neither counts.
    snapshot(cache, "org/ours", "b" * 40, {"old": 2 * MIB})
    snapshot(cache, "someone/other", "c" * 40, {"big": 5 * MIB})
    expected = allocated(os.path.join(ours, "blobs", "b1")) + allocated(os.path.join(ours, "blobs", "b2"))
    assert nf.model_bytes(cache, [OURS]) == expected
    assert nf.model_bytes(cache, []) == 0


def test_a_blob_linked_twice_counts_once(tmp_path):
    cache = str(tmp_path)
    repo = snapshot(cache, "org/ours", "a" * 40, {"b1": 2 * MIB})
    os.symlink("../../blobs/b1", os.path.join(repo, "snapshots", "a" * 40, "copy.safetensors"))
    assert nf.model_bytes(cache, [OURS]) == allocated(os.path.join(repo, "blobs", "b1"))


def test_disk_entries_use_models_for_the_checkpoint_only(tmp_path):
    cache, prepared = tmp_path / "hf", tmp_path / "prepared"
    snapshot(str(cache), "someone/other", "c" * 40, {"big": 4 * MIB})
    write(str(prepared / "layer0.bin"), 2 * MIB)
    entries = nf.disk_entries({"checkpoint": 10 ** 9, "prepared": 10 ** 9},
                              {"checkpoint": str(cache), "prepared": str(prepared)}, [OURS])
    by_name = dict((e["name"], e) for e in entries)
    assert by_name["checkpoint"]["present"] == 0
    assert by_name["prepared"]["present"] == allocated(str(prepared / "layer0.bin"))
    stats = os.statvfs(str(tmp_path))
    # free as df would report it for this user (f_bavail), measured here a moment later
    assert abs(by_name["checkpoint"]["free"] - stats.f_bavail * stats.f_frsize) < 64 * MIB
    assert by_name["checkpoint"]["mount"] == by_name["prepared"]["mount"]


def test_disk_entry_for_a_directory_not_made_yet_measures_its_parent(tmp_path):
    (entry,) = nf.disk_entries({"session": 5}, {"session": str(tmp_path / "a" / "b")}, [])
    assert entry["checked"] == str(tmp_path) and entry["present"] == 0 and "error" not in entry


def test_parse_docker_ps_and_match_pids_by_cgroup():
    inner = "3" * 64
    outer = "9" * 64
    text = ('{"ID":"%s","Names":"glm53-tf-r0","Labels":"dgx_spark.glm53.engine=tensorfold,x=y"}\n'
            '{"ID":"%s","Names":"other","Labels":""}\n' % (inner, "4" * 64))
    containers = parse_docker_ps(text)
    assert containers[inner] == {"id": inner, "name": "glm53-tf-r0",
                                 "labels": {"dgx_spark.glm53.engine": "tensorfold", "x": "y"}}
    cgroups = {
        # nested: the lab node's own container id first, the engine container innermost
        101: "0::/system.slice/docker-%s.scope/docker/%s\n" % (outer, inner),
        102: "0::/user.slice/user-1000.slice/session-3.scope\n",
    }
    found = nf.containers_of_pids([101, 102, 103], containers, lambda pid: cgroups.get(pid, ""))
    assert found == {"101": containers[inner]}


def test_read_cgroup_of_this_process():
    assert nf.read_cgroup(os.getpid()) != ""
    assert nf.read_cgroup(2 ** 22 + 7) == ""
