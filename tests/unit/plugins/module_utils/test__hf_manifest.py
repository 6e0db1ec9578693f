"""_hf_manifest: the completion manifest (build, render, read, the schema check) and the
verification of a snapshot's files against a file list, on a cache tree laid out here as
huggingface_hub lays it out.

Expected hashes are computed here with hashlib from the bytes the test wrote, never by the
code under test.
"""

import hashlib
import json
import os

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_manifest as hm
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import repo_folder
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import git_blob, small_tree

REPO = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"


@pytest.fixture
def tree(tmp_path):
    return small_tree(tmp_path, REPO, SHA)


def test_the_manifest_lies_beside_the_snapshots():
    repo_dir = repo_folder("/c", REPO)
    assert hm.manifest_file(repo_dir, SHA) == repo_dir + "/.glm53/" + SHA + ".json"
    assert hm.manifest_rel(REPO, SHA) == "models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/.glm53/" + SHA + ".json"


def test_empty_pattern_lists_mean_no_filter():
    assert hm.normalize_patterns([]) is None and hm.normalize_patterns(None) is None
    assert hm.normalize_patterns(("a",)) == ["a"]


# ------------------------------------------------------------------------ verification


def test_an_intact_tree_verifies_both_ways(tree):
    assert hm.verify_files(tree.snap, tree.files, "size") == []
    assert hm.verify_files(tree.snap, tree.files, "sha256", workers=4) == []


def test_missing_and_dangling_files_are_missing(tree):
    os.unlink(os.path.join(tree.snap, "config.json"))
    os.unlink(tree.blob(tree.files[1]))
    failures = hm.verify_files(tree.snap, tree.files, "size")
    assert [(f["name"], f["state"], f["detail"]) for f in failures] == [
        ("config.json", "missing", "missing"), ("sub/model.safetensors", "missing", "link to a missing blob")]


def test_a_short_blob_is_bad_by_size(tree):
    entry = tree.files[1]
    os.truncate(tree.blob(entry), entry["size"] - 1)
    failures = hm.verify_files(tree.snap, tree.files, "size")
    assert failures == [{"name": entry["name"], "size": entry["size"], "state": "bad",
                         "detail": "size %d, expected %d" % (entry["size"] - 1, entry["size"])}]


def test_flipped_bytes_pass_size_and_fail_sha256(tree):
    entry = tree.files[1]
    with open(tree.blob(entry), "r+b") as handle:
        handle.seek(entry["size"] // 2)
        byte = handle.read(1)
        handle.seek(entry["size"] // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with open(tree.blob(entry), "rb") as handle:
        found = hashlib.sha256(handle.read()).hexdigest()
    assert hm.verify_files(tree.snap, tree.files, "size") == []
    failures = hm.verify_files(tree.snap, tree.files, "sha256", workers=2)
    assert [(f["name"], f["detail"]) for f in failures] == [
        (entry["name"], "sha256 %s, expected %s" % (found, entry["sha256"]))]


def test_a_changed_small_file_fails_its_git_blob_id(tree):
    entry = tree.files[0]
    with open(tree.blob(entry), "wb") as handle:
        handle.write(b'{"a": 2}\n')  # same size
    failures = hm.verify_files(tree.snap, tree.files, "sha256")
    assert [f["name"] for f in failures] == ["config.json"]
    assert failures[0]["detail"].startswith("git blob sha1 %s" % git_blob(b'{"a": 2}\n'))


def test_a_directory_where_a_file_belongs_is_bad(tree):
    path = os.path.join(tree.snap, "config.json")
    os.unlink(path)
    os.mkdir(path)
    failures = hm.verify_files(tree.snap, tree.files, "size")
    assert [(f["name"], f["state"], f["detail"]) for f in failures] == [("config.json", "bad", "not a regular file")]


def test_a_copied_regular_file_of_the_right_bytes_verifies(tree):
    # rsync -L from the head turns links into files: still a complete snapshot.
    entry = tree.files[1]
    link = os.path.join(tree.snap, "sub", "model.safetensors")
    os.unlink(link)
    with open(tree.blob(entry), "rb") as src, open(link, "wb") as dst:
        dst.write(src.read())
    assert hm.verify_files(tree.snap, tree.files, "sha256") == []


def test_a_stale_blob_of_a_missing_link_is_found(tree):
    entry = tree.files[1]
    os.unlink(os.path.join(tree.snap, "sub", "model.safetensors"))
    assert hm.stale_blob(tree.repo_dir, entry, "size") is None  # intact: the client may link it
    os.truncate(tree.blob(entry), 10)
    assert hm.stale_blob(tree.repo_dir, entry, "size") == tree.blob(entry)


def test_hashes_follow_the_bytes_read(tree):
    entry = tree.files[1]
    seen = []
    assert hm.sha256_of(tree.blob(entry), seen.append) == entry["sha256"]
    assert sum(seen) == entry["size"]
    small = tree.files[0]
    assert hm.git_blob_sha1_of(tree.blob(small), small["size"]) == small["git_sha1"]


def test_verification_counts_each_file_and_the_bytes_hashed(tree):
    counted, files = [], []
    assert hm.verify_files(tree.snap, tree.files, "sha256", workers=2, counter=counted.append,
                           on_file=lambda: files.append(1)) == []
    assert sum(counted) == sum(f["size"] for f in tree.files) and len(files) == 2


def test_failures_are_described_up_to_a_limit():
    failures = [{"name": "f%d" % n, "detail": "missing"} for n in range(12)]
    assert hm.describe_failures(failures[:2]) == "f0 (missing), f1 (missing)"
    assert hm.describe_failures(failures, limit=3) == "f0 (missing), f1 (missing), f2 (missing) and 9 more"


# --------------------------------------------------------------------------- manifest


def test_manifest_round_trip(tree):
    manifest = hm.build_manifest(REPO, SHA, ["*.json", "sub/"], None, tree.files, "sha256")
    path = hm.manifest_file(tree.repo_dir, SHA)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write(hm.render_manifest(manifest))
    loaded, problem = hm.read_manifest(path, REPO, SHA)
    assert problem is None and loaded == manifest
    assert loaded["bytes"] == sum(len(open(tree.blob(f), "rb").read()) for f in tree.files)
    assert loaded["schema"] == 1 and loaded["verified_with"] == "sha256"
    assert [f["name"] for f in loaded["files"]] == ["config.json", "sub/model.safetensors"]
    assert set(loaded["files"][0]) == {"name", "size", "sha256", "lfs", "git_sha1"}
    assert hm.same_selection(loaded, ["*.json", "sub/"], [])
    assert not hm.same_selection(loaded, ["*.json"], None)


def test_no_manifest_is_not_a_problem(tmp_path):
    assert hm.read_manifest(str(tmp_path / "none.json"), REPO, SHA) == (None, None)


@pytest.mark.parametrize("change, expected", [
    (lambda m: m.update(schema=2), "schema 2, expected 1"),
    (lambda m: m.update(revision="f" * 40), "it is for %s@%s" % (REPO, "f" * 40)),
    (lambda m: m["files"][0].update(name="../../../etc/passwd"), "not a plain relative path"),
    (lambda m: m.update(bytes=1), "bytes 1 is not the sum"),
    (lambda m: m["files"][1].update(sha256=None), "LFS file without a sha256"),
    (lambda m: m.update(files=[]), "no file list"),
    (lambda m: m.update(verified_with="md5"), "verified_with 'md5'"),
])
def test_unusable_manifests_say_why(tree, tmp_path, change, expected):
    manifest = hm.build_manifest(REPO, SHA, None, None, tree.files, "size")
    change(manifest)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest))
    loaded, problem = hm.read_manifest(str(path), REPO, SHA)
    assert loaded is None and expected in problem
    path.write_text("{not json")
    assert hm.read_manifest(str(path), REPO, SHA)[1].startswith("not JSON")
