"""_checkpoint: whether a checkpoint directory (a hub cache snapshot: relative links into
../../blobs) is complete, and its model_meta digest, proven equal to the recipe's
`sha256sum <meta files> | sha256sum` run by the real coreutils."""

import hashlib
import os
import shutil
import tempfile

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _checkpoint as ck
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import processes
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import (
    META_FILES,
    SHARDS,
    checkpoint_tree,
    entry,
    shell_model_meta,
    shell_sha256,
)

NODE, USER = "spark-worker", "spark"
NOBODY = 65534
FIX = ("Fix: rerun the hf_weights role (playbooks/site.yml does) so the pinned revision is fetched and verified "
       "again; nothing was started.")


def params(path, **extra):
    return dict(dict(path=str(path), meta_files=list(ck.META_FILES), index=ck.INDEX, fail_on_missing=True), **extra)


def run(path, **extra):
    return ck.run(params(path, **extra), NODE, USER)


def failure(path, **extra):
    with pytest.raises(ck.CheckpointError) as caught:
        run(path, **extra)
    return str(caught.value), caught.value.result


@pytest.fixture
def tree(tmp_path):
    return checkpoint_tree(tmp_path, SHARDS)


# --- complete ----------------------------------------------------------------------------------

def test_a_complete_snapshot_with_model_meta_equal_to_the_shell_pipeline(tree):
    result = run(tree.snap)
    assert result == {"changed": False, "path": tree.snap, "missing": [], "shards": 3, "shard_bytes": 6000,
                      "meta": shell_sha256(tree.snap),
                      "model_meta": shell_model_meta(tree.snap), "complete": True}
    assert list(result["meta"]) == ck.META_FILES == list(META_FILES)  # the recipe's files, in its order
    assert len(result["model_meta"]) == 64


def test_model_meta_follows_the_order_of_meta_files(tree):
    names = ["tokenizer_config.json", "config.json"]
    result = run(tree.snap, meta_files=names)
    assert result["model_meta"] == shell_model_meta(tree.snap, names)
    assert result["model_meta"] != run(tree.snap, meta_files=names[::-1])["model_meta"]
    assert list(result["meta"]) == names and result["complete"] is True


def test_model_meta_is_the_digest_of_the_sha256sum_lines():
    digests = {"a.json": "1" * 64, "b.json": "2" * 64}
    lines = ("1" * 64 + "  a.json\n" + "2" * 64 + "  b.json\n").encode()
    assert ck.model_meta(["a.json", "b.json"], digests) == hashlib.sha256(lines).hexdigest()
    assert ck.model_meta(["a.json", "b.json", "c.json"], digests) == ""


def test_shards_named_by_many_tensors_count_once(tree):
    with open(os.path.join(tree.snap, ck.INDEX)) as handle:
        assert handle.read().count("model-00001-of-00003.safetensors") == 2
    result = run(tree.snap)
    assert (result["shards"], result["shard_bytes"]) == (3, 6000)


def test_a_zero_size_shard_is_present(tmp_path):
    tree = checkpoint_tree(tmp_path, {"model-00001-of-00002.safetensors": b"", "model-00002-of-00002.safetensors": b"x"})
    result = run(tree.snap)
    assert (result["complete"], result["missing"], result["shard_bytes"]) == (True, [], 1)


def test_shards_in_a_subfolder_and_a_link_through_the_path(tmp_path):
    tree = checkpoint_tree(tmp_path, {"weights/model.safetensors": b"w" * 10})
    os.symlink(tree.snap, str(tmp_path / "current"))
    result = run(tmp_path / "current")
    assert result["path"] == os.path.realpath(tree.snap) and result["complete"] is True
    assert result["shard_bytes"] == 10


def test_tilde_is_this_users_home(tree, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run("~/" + os.path.relpath(tree.snap, str(tmp_path)))
    assert result["path"] == tree.snap and result["complete"] is True


# --- missing -------------------------------------------------------------------------------------

def test_a_missing_meta_file_empties_model_meta_and_fails_naming_it(tree):
    os.unlink(os.path.join(tree.snap, "chat_template.jinja"))
    msg, result = failure(tree.snap)
    assert msg == ("spark-worker: checkpoint %s is incomplete: missing chat_template.jinja (of 3 shards in "
                   "model.safetensors.index.json). %s" % (tree.snap, FIX))
    assert result["missing"] == ["chat_template.jinja"] and result["model_meta"] == ""
    assert "chat_template.jinja" not in result["meta"] and len(result["meta"]) == 3
    assert (result["complete"], result["shards"], result["shard_bytes"]) == (False, 3, 6000)


def test_a_missing_index_leaves_the_shards_unknown(tree):
    os.unlink(os.path.join(tree.snap, ck.INDEX))
    msg, result = failure(tree.snap)
    assert msg == ("spark-worker: checkpoint %s is incomplete: missing model.safetensors.index.json (the shards are "
                   "unknown without model.safetensors.index.json). %s" % (tree.snap, FIX))
    assert (result["missing"], result["shards"], result["shard_bytes"], result["model_meta"]) == (
        [ck.INDEX], 0, 0, "")


def test_an_index_outside_meta_files_is_still_required(tree):
    os.unlink(os.path.join(tree.snap, ck.INDEX))
    _msg, result = failure(tree.snap, meta_files=["config.json"])
    assert result["missing"] == [ck.INDEX]
    assert result["model_meta"] == shell_model_meta(tree.snap, ["config.json"])


def test_a_shard_with_no_link_is_missing(tree):
    os.unlink(os.path.join(tree.snap, "model-00002-of-00003.safetensors"))
    msg, result = failure(tree.snap)
    assert "is incomplete: missing model-00002-of-00003.safetensors (of 3 shards in " in msg
    assert result["missing"] == ["model-00002-of-00003.safetensors"] and result["shard_bytes"] == 4000
    # The metadata is still all there: the ranks would agree on it.
    assert result["model_meta"] == shell_model_meta(tree.snap)


def test_a_dangling_link_is_a_missing_file(tree):
    name = "model-00003-of-00003.safetensors"
    os.unlink(tree.blob(entry(tree, name)))
    assert os.path.islink(os.path.join(tree.snap, name))
    _msg, result = failure(tree.snap)
    assert result["missing"] == [name] and result["shard_bytes"] == 3000


def test_a_dangling_meta_file_link_is_missing(tree):
    os.unlink(tree.blob(entry(tree, "tokenizer_config.json")))
    _msg, result = failure(tree.snap)
    assert result["missing"] == ["tokenizer_config.json"] and result["model_meta"] == ""


def test_a_partial_download_never_counts(tree):
    # The blob is still downloading: only <etag>.<8 hex>.incomplete exists, the link dangles.
    name = "model-00001-of-00003.safetensors"
    blob = tree.blob(entry(tree, name))
    os.rename(blob, blob + ".3f2a9c0d.incomplete")
    _msg, result = failure(tree.snap)
    assert result["missing"] == [name]
    # A link straight to a partial download is no file either.
    link = os.path.join(tree.snap, name)
    os.unlink(link)
    os.symlink(os.path.relpath(blob + ".3f2a9c0d.incomplete", tree.snap), link)
    assert os.path.isfile(link)
    _msg, result = failure(tree.snap)
    assert result["missing"] == [name] and result["shard_bytes"] == 5000


@pytest.mark.parametrize("kind", ["directory", "fifo", "link to a directory"])
def test_a_shard_that_is_not_a_regular_file_is_missing(tree, kind):
    name = "model-00002-of-00003.safetensors"
    link = os.path.join(tree.snap, name)
    os.unlink(link)
    if kind == "directory":
        os.mkdir(link)
    elif kind == "fifo":
        os.mkfifo(link)
    else:
        blob = tree.blob(entry(tree, name))
        os.unlink(blob)
        os.mkdir(blob)
        os.symlink(os.path.relpath(blob, tree.snap), link)
    _msg, result = failure(tree.snap)
    assert result["missing"] == [name] and result["complete"] is False


def test_a_meta_file_that_is_a_directory_is_missing(tree):
    link = os.path.join(tree.snap, "config.json")
    os.unlink(link)
    os.mkdir(link)
    _msg, result = failure(tree.snap)
    assert result["missing"] == ["config.json"] and "config.json" not in result["meta"]


def test_missing_lists_meta_files_in_order_then_shards_sorted_and_the_message_shows_five(tmp_path):
    shards = {"model-%05d-of-00009.safetensors" % i: b"s" for i in range(1, 10)}
    tree = checkpoint_tree(tmp_path, shards)
    for name in ["tokenizer_config.json", "config.json"] + sorted(shards)[2:][::-1]:
        os.unlink(os.path.join(tree.snap, name))
    msg, result = failure(tree.snap)
    assert result["missing"] == ["config.json", "tokenizer_config.json"] + sorted(shards)[2:]
    assert ("is incomplete: missing config.json, tokenizer_config.json, model-00003-of-00009.safetensors, "
            "model-00004-of-00009.safetensors, model-00005-of-00009.safetensors and 4 more (of 9 shards in "
            "model.safetensors.index.json). Fix: rerun the hf_weights role") in msg
    assert (result["shards"], result["shard_bytes"]) == (9, 2)


def test_fail_on_missing_false_reports_without_failing(tree):
    os.unlink(os.path.join(tree.snap, "model-00001-of-00003.safetensors"))
    result = run(tree.snap, fail_on_missing=False)
    assert (result["complete"], result["missing"], result["shards"]) == (False, ["model-00001-of-00003.safetensors"], 3)
    assert result["model_meta"] == shell_model_meta(tree.snap)


# --- the directory itself --------------------------------------------------------------------------

def test_a_path_that_does_not_exist_fails_naming_it(tmp_path):
    msg, result = failure(tmp_path / "nope", fail_on_missing=False)
    assert msg == "spark-worker: checkpoint %s does not exist. %s" % (tmp_path / "nope", FIX)
    assert result["missing"] == ck.META_FILES and result["complete"] is False


def test_a_path_that_is_a_file_fails_naming_it(tree):
    path = os.path.join(tree.snap, "config.json")
    msg, _result = failure(path)
    assert msg == "spark-worker: checkpoint %s is not a directory. %s" % (path, FIX)


# --- the index ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, said", [
    (b'{"weight_map": {"a": "x.safetensors",', "it is not JSON (Expecting"),
    (b"\xff\xfe{}", "it is not UTF-8 text"),
    (b'["x.safetensors"]', "it holds a JSON list, not an object"),
    (b'{"metadata": {}}', "it has no weight_map"),
    (b'{"weight_map": ["x.safetensors"]}', "its weight_map is a JSON list, not an object of tensor name to shard file"),
    (b'{"weight_map": {}}', "its weight_map names no shard"),
    (b'{"weight_map": {"w": 3}}', "weight_map['w'] is 3, not a shard file name"),
    (b'{"weight_map": {"w": null}}', "weight_map['w'] is null, not a shard file name"),
])
def test_an_invalid_index_fails_naming_the_file_and_what_is_wrong(tree, data, said):
    index = tree.blob(entry(tree, ck.INDEX))
    with open(index, "wb") as handle:
        handle.write(data)
    msg, result = failure(tree.snap, fail_on_missing=False)
    assert msg.startswith("spark-worker: checkpoint index %s/model.safetensors.index.json is not valid: %s"
                          % (tree.snap, said)), msg
    assert msg.endswith(FIX)
    # The meta files were read before: their digests still come back.
    assert result["model_meta"] == shell_model_meta(tree.snap) and result["complete"] is False


@pytest.mark.parametrize("shard", ["../../blobs/x.safetensors", "/etc/passwd", "sub/../../x.safetensors",
                                   "./x.safetensors", ""])
def test_a_shard_name_that_escapes_the_directory_is_refused(tree, shard):
    index = tree.blob(entry(tree, ck.INDEX))
    with open(index, "w") as handle:
        handle.write('{"weight_map": {"a": "model-00001-of-00003.safetensors", "b": "%s"}}' % shard)
    msg, _result = failure(tree.snap)
    assert ("is not valid: weight_map names the shard %r, which is not a plain relative path inside the checkpoint "
            "directory" % shard) in msg


@pytest.mark.parametrize("meta_files, index, said", [
    ([], ck.INDEX, "meta_files is empty"),
    (["../config.json"], ck.INDEX, "meta_files: file name '../config.json' is not a plain relative path"),
    (["a\nb.json"], ck.INDEX, "meta_files: file name 'a\\nb.json' holds a line break"),
    (["config.json", "config.json"], ck.INDEX, "meta_files names config.json twice"),
    (ck.META_FILES, "/abs/index.json", "index: file name '/abs/index.json' is not a relative path"),
])
def test_option_values_that_are_not_plain_names_are_refused(tree, meta_files, index, said):
    msg, result = failure(tree.snap, meta_files=meta_files, index=index)
    assert msg.startswith("checkpoint_check: ") and said in msg and result == {}


# --- permissions: reported, never a traceback --------------------------------------------------------

@pytest.fixture
def open_dir():
    """A directory anyone may look into (pytest's own tmp dirs are the user's alone)."""
    path = tempfile.mkdtemp(prefix="glm53-checkpoint-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def as_unprivileged(path):
    """ck.run as nobody when we are root (chmod does not stop root), else as ourselves:
    ("ok", result) or ("failed", message, result)."""
    def check():
        try:
            return ["ok", run(path)]
        except ck.CheckpointError as exc:
            return ["failed", str(exc), exc.result]

    if os.geteuid() != 0:
        return check()

    def drop_to_nobody():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    return processes.in_child(check, setup=drop_to_nobody)


def test_everything_readable_as_another_user(open_dir):
    tree = checkpoint_tree(open_dir, SHARDS)
    assert as_unprivileged(tree.snap)[0] == "ok"


def test_an_unreadable_meta_file_is_reported_whatever_fail_on_missing(open_dir):
    tree = checkpoint_tree(open_dir, SHARDS)
    os.chmod(tree.blob(entry(tree, "config.json")), 0o600)
    outcome = as_unprivileged(tree.snap)
    assert outcome[0] == "failed"
    msg, result = outcome[1], outcome[2]
    assert "checkpoint %s cannot be read by spark: config.json (Permission denied). Fix: give spark read access to " \
           "those files and the blobs they link to; nothing was started." % tree.snap in msg
    assert result["missing"] == [] and result["model_meta"] == "" and result["complete"] is False
    assert result["shards"] == 3


def test_shards_behind_a_closed_blobs_directory_are_reported(open_dir):
    tree = checkpoint_tree(open_dir, SHARDS)
    # The meta files are readable, the shards' blobs are not even visible.
    for name in ck.META_FILES:
        link = os.path.join(tree.snap, name)
        with open(link, "rb") as handle:
            data = handle.read()
        os.unlink(link)
        with open(link, "wb") as handle:
            handle.write(data)
    os.chmod(tree.blobs, 0o700)
    try:
        outcome = as_unprivileged(tree.snap)
    finally:
        os.chmod(tree.blobs, 0o755)
    assert outcome[0] == "failed"
    assert ("cannot be read by spark: model-00001-of-00003.safetensors (Permission denied), "
            "model-00002-of-00003.safetensors (Permission denied), model-00003-of-00003.safetensors "
            "(Permission denied)") in outcome[1]
    assert outcome[2]["model_meta"] == shell_model_meta(tree.snap) and outcome[2]["complete"] is False


def test_a_directory_one_cannot_look_into_fails_naming_it(open_dir):
    tree = checkpoint_tree(open_dir, SHARDS)
    os.chmod(tree.snap, 0o700)
    try:
        outcome = as_unprivileged(tree.snap)
    finally:
        os.chmod(tree.snap, 0o755)
    assert outcome[:2] == ["failed", "spark-worker: checkpoint %s cannot be looked into: Permission denied. Fix: give "
                                     "spark read access to it and search access to its parent directories; nothing "
                                     "was started." % tree.snap]


def test_the_message_is_none_when_nothing_is_wrong():
    result = {"path": "/p", "missing": [], "shards": 1}
    assert ck.failure_message(NODE, USER, result, []) is None
    assert ck.failure_message(NODE, USER, dict(result, missing=["x"]), [], fail_on_missing=False) is None


def test_a_directory_behind_a_closed_parent_fails_naming_it(open_dir):
    tree = checkpoint_tree(open_dir, SHARDS)
    os.chmod(tree.repo_dir, 0o700)
    try:
        outcome = as_unprivileged(tree.snap)
    finally:
        os.chmod(tree.repo_dir, 0o755)
    assert outcome[:2] == ["failed", "spark-worker: checkpoint %s cannot be examined: Permission denied. Fix: give "
                                     "spark read access to it and search access to its parent directories; nothing "
                                     "was started." % tree.snap]
    assert outcome[2]["missing"] == [] and outcome[2]["complete"] is False
