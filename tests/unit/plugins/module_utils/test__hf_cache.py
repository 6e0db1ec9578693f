"""_hf_cache: the hub cache layout, as huggingface_hub lays it out, and the repo file names
that may become paths in it."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_cache as hc

REPO = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "", "a\\b", None])
def test_names_that_would_escape_the_snapshot_are_refused(name):
    assert hc.name_problem(name)


@pytest.mark.parametrize("name", ["config.json", "sub/dir/model.safetensors", ".gitattributes"])
def test_plain_names_pass(name):
    assert hc.name_problem(name) is None


def test_layout_is_the_clients():
    repo_dir = hc.repo_folder("/c", REPO)
    assert repo_dir == "/c/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw"
    assert hc.snapshot_folder(repo_dir, SHA) == repo_dir + "/snapshots/" + SHA
    assert hc.file_path(repo_dir, "sub/dir/x.bin") == repo_dir + "/sub/dir/x.bin"
