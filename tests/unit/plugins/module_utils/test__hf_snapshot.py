"""hf_snapshot's run helpers: input checks, the client's own pattern filter, repair of a cache
tree laid out as huggingface_hub lays it out, free space and the bytes of running downloads.
The manifest and verification are test__hf_manifest.py's, the progress file
test__progress_file.py's.

File lists come from the real huggingface_hub dataclasses.
"""

import os
import time

import pytest
from huggingface_hub.hf_api import BlobLfsInfo, RepoSibling
from huggingface_hub.utils import filter_repo_objects

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_snapshot as hs
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_manifest import normalize_patterns
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import small_tree

REPO = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"


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
    chosen = hs.select_files(entries, normalize_patterns(allow), normalize_patterns(ignore), filter_repo_objects)
    assert [e["name"] for e in chosen] == expected


# ------------------------------------------------------------------------------ repair


@pytest.fixture
def tree(tmp_path):
    return small_tree(tmp_path, REPO, SHA)


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


# ------------------------------------------------------------------------ space, partials


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
