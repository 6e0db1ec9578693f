"""hf_snapshot helpers: input checks, the client's own pattern filter, verification of a cache
tree laid out here as huggingface_hub lays it out, repair, the manifest and progress figures.

Expected hashes are computed here with hashlib from the bytes the test wrote, never by the
code under test; file lists come from the real huggingface_hub dataclasses.
"""

import hashlib
import json
import os
import time

import pytest
from huggingface_hub.hf_api import BlobLfsInfo, RepoSibling
from huggingface_hub.utils import filter_repo_objects

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_snapshot as hs

REPO = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"


def git_blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ----------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("revision", ["main", SHA[:39], SHA[:7], SHA.upper(), "refs/heads/main", "", None, SHA + "0"])
def test_only_a_full_sha_is_a_revision(revision):
    assert hs.revision_problem(REPO, revision) == (
        "revision for %s must be a full 40-hex commit sha, found %r" % (REPO, revision))


def test_the_message_for_main_reads_as_documented():
    assert hs.revision_problem("brandonmusic/X", "main") == (
        "revision for brandonmusic/X must be a full 40-hex commit sha, found 'main'")
    assert hs.revision_problem(REPO, SHA) is None


@pytest.mark.parametrize("repo_id", ["", "a/b/c", "/b", "a/", "a/..", " a/b", None, "a//b"])
def test_bad_repo_ids_are_refused(repo_id):
    assert hs.repo_id_problem(repo_id) == (
        "repo_id must be a Hugging Face model repo id like org/name, found %r" % (repo_id,))


@pytest.mark.parametrize("repo_id", [REPO, "gpt2", "org/name.with-dots_1"])
def test_good_repo_ids_pass(repo_id):
    assert hs.repo_id_problem(repo_id) is None


def test_every_bad_input_is_named_at_once():
    problems = hs.input_problems("a/b/c", "main", "md5", 0, 0)
    assert len(problems) == 5
    assert any("found 'md5'" in p for p in problems) and any("max_workers" in p for p in problems)
    assert hs.input_problems(REPO, SHA, "sha256", 8, 60) == []


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "", "a\\b", None])
def test_names_that_would_escape_the_snapshot_are_refused(name):
    assert hs.name_problem(name)


@pytest.mark.parametrize("name", ["config.json", "sub/dir/model.safetensors", ".gitattributes"])
def test_plain_names_pass(name):
    assert hs.name_problem(name) is None


def test_layout_is_the_clients():
    repo_dir = hs.repo_folder("/c", REPO)
    assert repo_dir == "/c/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw"
    assert hs.snapshot_folder(repo_dir, SHA) == repo_dir + "/snapshots/" + SHA
    assert hs.manifest_file(repo_dir, SHA) == repo_dir + "/.glm53/" + SHA + ".json"


# ------------------------------------------------------------------------ file lists


def siblings():
    lfs_sha = "a" * 64
    return [
        RepoSibling(rfilename="config.json", size=441, blob_id="1" * 40),
        RepoSibling(rfilename="model-00001.safetensors", size=1000, blob_id="2" * 40,
                    lfs=BlobLfsInfo(size=1000, sha256=lfs_sha, pointer_size=134)),
        RepoSibling(rfilename="docs/README.md", size=12, blob_id="3" * 40),
        RepoSibling(rfilename="original/model.pt", size=5, blob_id="4" * 40,
                    lfs=BlobLfsInfo(size=5, sha256="b" * 64, pointer_size=130)),
    ]


def test_entries_from_the_clients_siblings():
    entries = hs.entries_from_siblings(siblings())
    assert [e["name"] for e in entries] == ["config.json", "docs/README.md", "model-00001.safetensors",
                                            "original/model.pt"]
    model = entries[2]
    assert model == {"name": "model-00001.safetensors", "size": 1000, "sha256": "a" * 64, "lfs": True, "git_sha1": None}
    assert entries[0] == {"name": "config.json", "size": 441, "sha256": None, "lfs": False, "git_sha1": "1" * 40}


def test_a_listing_without_sizes_is_refused():
    with pytest.raises(hs.SnapshotError, match="no size for 'config.json'"):
        hs.entries_from_siblings([RepoSibling(rfilename="config.json")])


@pytest.mark.parametrize("allow, ignore, expected", [
    (None, None, ["config.json", "docs/README.md", "model-00001.safetensors", "original/model.pt"]),
    (["*.safetensors", "*.json"], None, ["config.json", "model-00001.safetensors"]),
    (None, ["original/"], ["config.json", "docs/README.md", "model-00001.safetensors"]),  # a folder pattern
    (["*"], ["*.md"], ["config.json", "model-00001.safetensors", "original/model.pt"]),
    (["nothing*"], None, []),
])
def test_patterns_select_with_the_clients_semantics(allow, ignore, expected):
    entries = hs.entries_from_siblings(siblings())
    chosen = hs.select_files(entries, hs.normalize_patterns(allow), hs.normalize_patterns(ignore), filter_repo_objects)
    assert [e["name"] for e in chosen] == expected


def test_empty_pattern_lists_mean_no_filter():
    assert hs.normalize_patterns([]) is None and hs.normalize_patterns(None) is None
    assert hs.normalize_patterns(("a",)) == ["a"]


# ------------------------------------------------------------------- a fake cache tree


class Tree(object):
    """A repo in the hub cache, laid out as huggingface_hub writes it: blobs named by etag,
    relative links from snapshots/<sha>."""

    def __init__(self, root):
        self.repo_dir = hs.repo_folder(str(root), REPO)
        self.snap = hs.snapshot_folder(self.repo_dir, SHA)
        self.blobs = os.path.join(self.repo_dir, "blobs")
        os.makedirs(self.blobs)
        os.makedirs(self.snap)
        self.files = []

    def add(self, name, data, lfs):
        entry = {"name": name, "size": len(data), "lfs": lfs,
                 "sha256": hashlib.sha256(data).hexdigest() if lfs else None,
                 "git_sha1": None if lfs else git_blob(data)}
        blob = os.path.join(self.blobs, hs.blob_name(entry))
        with open(blob, "wb") as handle:
            handle.write(data)
        link = os.path.join(self.snap, *name.split("/"))
        if not os.path.isdir(os.path.dirname(link)):
            os.makedirs(os.path.dirname(link))
        os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
        self.files.append(entry)
        return entry

    def blob(self, entry):
        return os.path.join(self.blobs, hs.blob_name(entry))


@pytest.fixture
def tree(tmp_path):
    t = Tree(tmp_path)
    t.add("config.json", b'{"a": 1}\n', lfs=False)
    t.add("sub/model.safetensors", os.urandom(3 * 1024 * 1024 + 17), lfs=True)
    return t


def test_an_intact_tree_verifies_both_ways(tree):
    assert hs.verify_files(tree.snap, tree.files, "size") == []
    assert hs.verify_files(tree.snap, tree.files, "sha256", workers=4) == []


def test_missing_and_dangling_files_are_missing(tree):
    os.unlink(os.path.join(tree.snap, "config.json"))
    os.unlink(tree.blob(tree.files[1]))
    failures = hs.verify_files(tree.snap, tree.files, "size")
    assert [(f["name"], f["state"], f["detail"]) for f in failures] == [
        ("config.json", "missing", "missing"), ("sub/model.safetensors", "missing", "link to a missing blob")]


def test_a_short_blob_is_bad_by_size(tree):
    entry = tree.files[1]
    os.truncate(tree.blob(entry), entry["size"] - 1)
    failures = hs.verify_files(tree.snap, tree.files, "size")
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
    assert hs.verify_files(tree.snap, tree.files, "size") == []
    failures = hs.verify_files(tree.snap, tree.files, "sha256", workers=2)
    assert [(f["name"], f["detail"]) for f in failures] == [
        (entry["name"], "sha256 %s, expected %s" % (found, entry["sha256"]))]


def test_a_changed_small_file_fails_its_git_blob_id(tree):
    entry = tree.files[0]
    with open(tree.blob(entry), "wb") as handle:
        handle.write(b'{"a": 2}\n')  # same size
    failures = hs.verify_files(tree.snap, tree.files, "sha256")
    assert [f["name"] for f in failures] == ["config.json"]
    assert failures[0]["detail"].startswith("git blob sha1 %s" % git_blob(b'{"a": 2}\n'))


def test_a_directory_where_a_file_belongs_is_bad(tree):
    path = os.path.join(tree.snap, "config.json")
    os.unlink(path)
    os.mkdir(path)
    failures = hs.verify_files(tree.snap, tree.files, "size")
    assert [(f["name"], f["state"], f["detail"]) for f in failures] == [("config.json", "bad", "not a regular file")]


def test_a_copied_regular_file_of_the_right_bytes_verifies(tree):
    # rsync -L from the head turns links into files: still a complete snapshot.
    entry = tree.files[1]
    link = os.path.join(tree.snap, "sub", "model.safetensors")
    os.unlink(link)
    with open(tree.blob(entry), "rb") as src, open(link, "wb") as dst:
        dst.write(src.read())
    assert hs.verify_files(tree.snap, tree.files, "sha256") == []


def test_repair_removes_the_link_and_its_blob_only(tree, tmp_path):
    entry = tree.files[1]
    blob = tree.blob(entry)
    removed = hs.remove_entry(tree.repo_dir, SHA, entry)
    assert removed == [os.path.join(tree.snap, "sub", "model.safetensors"), os.path.normpath(blob)]
    assert not os.path.lexists(blob) and os.path.exists(tree.blob(tree.files[0]))
    # A link that leads outside blobs/ loses only the link.
    outside = tmp_path / "precious"
    outside.write_bytes(b"keep")
    link = os.path.join(tree.snap, "config.json")
    os.unlink(link)
    os.symlink(str(outside), link)
    assert hs.remove_entry(tree.repo_dir, SHA, tree.files[0]) == [link]
    assert outside.read_bytes() == b"keep"


def test_a_stale_blob_of_a_missing_link_is_found(tree):
    entry = tree.files[1]
    os.unlink(os.path.join(tree.snap, "sub", "model.safetensors"))
    assert hs.stale_blob(tree.repo_dir, entry, "size") is None  # intact: the client may link it
    os.truncate(tree.blob(entry), 10)
    assert hs.stale_blob(tree.repo_dir, entry, "size") == tree.blob(entry)


# --------------------------------------------------------------------------- manifest


def test_manifest_round_trip(tree):
    manifest = hs.build_manifest(REPO, SHA, ["*.json", "sub/"], None, tree.files, "sha256")
    path = hs.manifest_file(tree.repo_dir, SHA)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write(hs.render_manifest(manifest))
    loaded, problem = hs.read_manifest(path, REPO, SHA)
    assert problem is None and loaded == manifest
    assert loaded["bytes"] == sum(len(open(tree.blob(f), "rb").read()) for f in tree.files)
    assert loaded["schema"] == 1 and loaded["verified_with"] == "sha256"
    assert [f["name"] for f in loaded["files"]] == ["config.json", "sub/model.safetensors"]
    assert set(loaded["files"][0]) == {"name", "size", "sha256", "lfs", "git_sha1"}
    assert hs.same_selection(loaded, ["*.json", "sub/"], [])
    assert not hs.same_selection(loaded, ["*.json"], None)


def test_no_manifest_is_not_a_problem(tmp_path):
    assert hs.read_manifest(str(tmp_path / "none.json"), REPO, SHA) == (None, None)


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
    manifest = hs.build_manifest(REPO, SHA, None, None, tree.files, "size")
    change(manifest)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest))
    loaded, problem = hs.read_manifest(str(path), REPO, SHA)
    assert loaded is None and expected in problem
    path.write_text("{not json")
    assert hs.read_manifest(str(path), REPO, SHA)[1].startswith("not JSON")


# --------------------------------------------------------------------- space, progress


def test_free_bytes_of_a_path_still_to_be_created(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    found = hs.free_bytes(str(deep))
    fs = os.statvfs(str(tmp_path))
    # Other processes write to the same disk meanwhile.
    assert abs(found - fs.f_bavail * fs.f_frsize) < 256 << 20
    assert not deep.exists()


def test_space_message_names_path_and_both_figures():
    text = hs.space_message(REPO, SHA, "/c/blobs", 1 << 30, 3 << 30)
    assert text.startswith("no space left for %s@%s under /c/blobs: 1.0 GiB (1073741824 bytes) free, "
                           "3.0 GiB (3221225472 bytes) still needed" % (REPO, SHA))


def test_progress_record_rate_and_eta():
    record = hs.progress_record("fetching", 600, 1000, 1, 3, [(10.0, 100), (12.0, 300), (15.0, 600)], 1700000000.0)
    assert record == {"phase": "fetching", "bytes_done": 600, "bytes_total": 1000, "files_done": 1, "files_total": 3,
                      "rate_bps": 100, "eta_s": 4.0, "updated": 1700000000.0}
    first = hs.progress_record("fetching", 0, 1000, 0, 3, [(10.0, 0)], 1.0)
    assert first["rate_bps"] is None and first["eta_s"] is None
    assert hs.progress_record("done", 5, 5, 1, 1, [], 1.0)["eta_s"] == 0.0


def test_partial_bytes_counts_only_this_runs_temporary_files(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / ("a" * 64 + ".1234abcd.incomplete")).write_bytes(b"x" * 100)
    (blobs / ("a" * 64 + ".incomplete")).write_bytes(b"x" * 10)
    (blobs / ("b" * 64 + ".9999eeee.incomplete")).write_bytes(b"x" * 1000)  # not one of ours
    old = blobs / ("c" * 64 + ".0000aaaa.incomplete")  # left by a killed run
    old.write_bytes(b"x" * 5000)
    os.utime(str(old), (time.time() - 3600, time.time() - 3600))
    assert hs.partial_bytes(str(blobs), ["a" * 64, "c" * 64], time.time() - 60) == 110
    assert hs.partial_bytes(str(tmp_path / "none"), ["a" * 64], 0) == 0


def test_progress_file_is_rewritten_while_a_phase_runs(tmp_path):
    path = str(tmp_path / "progress" / "p.json")
    progress = hs.Progress(path, interval=0.1)
    progress.start("fetching", 1000, 2)
    progress.add(400, 1)
    deadline = time.time() + 5
    seen = None
    while time.time() < deadline:
        with open(path) as handle:
            seen = json.load(handle)
        if seen["bytes_done"] == 400:
            break
        time.sleep(0.05)
    assert seen["phase"] == "fetching" and seen["bytes_done"] == 400 and seen["files_done"] == 1
    progress.finish("done", 1000, 2)
    with open(path) as handle:
        final = json.load(handle)
    assert (final["phase"], final["bytes_done"], final["files_done"], final["eta_s"]) == ("done", 1000, 2, 0.0)
    assert os.listdir(os.path.dirname(path)) == ["p.json"]  # no temporary files left


def test_the_token_is_masked_in_text():
    assert hs.scrub("Bearer hf_secret in a header", "hf_secret") == "Bearer ******** in a header"
    assert hs.scrub("nothing", None) == "nothing"
