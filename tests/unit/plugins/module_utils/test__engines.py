"""_engines: which path a container belongs to, by label or whole name, and nothing else."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _engines as en

LABEL = "dgx_spark.glm53.engine"


def test_the_table_names_both_paths():
    assert en.PATHS == ("tensorfold", "vllm")
    assert en.LABEL == LABEL


@pytest.mark.parametrize("path, rank, head, worker", [
    ("tensorfold", 1, "glm53-tf-r0", "glm53-tf-r1"),
    ("tensorfold", 3, "glm53-tf-r0", "glm53-tf-r3"),
    # vLLM runs one container per node under the same name.
    ("vllm", 1, "glm53-vllm", "glm53-vllm"),
    ("vllm", 2, "glm53-vllm", "glm53-vllm"),
])
def test_default_container_names(path, rank, head, worker):
    assert en.head_container(path) == head
    assert en.worker_container(path, rank) == worker


@pytest.mark.parametrize("name, labels, path", [
    ("glm53-tf-r0", {}, "tensorfold"),
    ("glm53-tf-r1", None, "tensorfold"),
    ("glm53-tf-r12", {"other": "x"}, "tensorfold"),
    ("glm53-vllm", {}, "vllm"),
    # Unlabelled, numbered vLLM ranks are still ours by name.
    ("glm53-vllm-r1", {}, "vllm"),
    # A labelled container is the label's path whatever its name.
    ("my-vllm-test", {LABEL: "vllm"}, "vllm"),
    ("renamed-by-hand", {LABEL: "tensorfold"}, "tensorfold"),
    # The label wins over the name: it is set on purpose.
    ("glm53-tf-r0", {LABEL: "vllm"}, "vllm"),
    # A label value that names no path leaves the name to decide.
    ("glm53-tf-r0", {LABEL: "test"}, "tensorfold"),
    ("someone-else", {LABEL: "test"}, None),
    # Names match whole: a foreign container named after ours is not ours.
    ("glm53-tf-r0-backup", {}, None),
    ("old-glm53-tf-r0", {}, None),
    ("glm53-tf-r", {}, None),
    ("glm53-vllm-backup", {}, None),
    ("glm53-vllm-r1-old", {}, None),
    ("postgres", {"com.docker.compose.project": "x"}, None),
    ("", {}, None),
    (None, None, None),
])
def test_path_of(name, labels, path):
    assert en.path_of(name, labels) == path


def test_engines_of_selects_only_the_given_paths_in_order():
    containers = [
        {"id": "a", "name": "glm53-tf-r0", "labels": {}},
        {"id": "b", "name": "glm53-tf-r0-backup", "labels": {}},
        {"id": "c", "name": "serve", "labels": {LABEL: "vllm"}},
        {"id": "d", "name": "glm53-vllm-r1", "labels": {}},
        {"id": "e", "name": "postgres", "labels": {}},
    ]
    assert [(c["id"], c["path"]) for c in en.engines_of(containers, ["vllm"])] == [("c", "vllm"), ("d", "vllm")]
    assert [c["id"] for c in en.engines_of(containers, ["tensorfold"])] == ["a"]
    assert [c["id"] for c in en.engines_of(containers, en.PATHS)] == ["a", "c", "d"]
    assert en.engines_of(containers, []) == []
    # The input is left as it was.
    assert "path" not in containers[0]
