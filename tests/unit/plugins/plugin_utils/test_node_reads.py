"""A path role's one read per node (tensorfold: install.yml; vllm_nvfp4: build.yml): parsed into
its values and JSON sections; anything else in its place fails naming the line."""

import base64
import json

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._node_reads import TENSORFOLD, VLLM, ReadsError, parse_reads

TREE, PATCHES = "a" * 40, "b" * 40
EXAMPLE = "GLM53_TF_BATCH=8\nGLM53_TF_BATCH_PIECE=4096\n"
STARTED = "c" * 64 + "\n"
IMAGES = [{"Id": "sha256:" + "d" * 64, "RepoTags": ["glm53-tensorfold:lp9001"]}]


def b64(text):
    return base64.b64encode(text.encode()).decode()


def output(kit_tree=TREE, example=EXAMPLE, started=STARTED, images=json.dumps(IMAGES, indent=4)):
    """As the task's printf and docker image inspect print it."""
    return "kit_tree=%s\npatches_tree=%s\nexample=%s\nstarted_env=%s\nimages:\n%s" % (
        kit_tree, PATCHES, b64(example) if example else "", b64(started) if started else "", images)


def test_the_heads_read():
    assert parse_reads(output(), *TENSORFOLD) == {
        "kit_tree": TREE, "patches_tree": PATCHES, "example": EXAMPLE, "started_env": STARTED, "images": IMAGES}


def test_the_workers_read_has_no_kit_example_or_started_env():
    reads = parse_reads(output(kit_tree="", example="", started=""), *TENSORFOLD)
    assert (reads["kit_tree"], reads["example"], reads["started_env"]) == ("", "", "")
    assert reads["patches_tree"] == PATCHES


@pytest.mark.parametrize("inspect", ["", "[]\n"])
def test_no_image_is_an_empty_list(inspect):
    assert parse_reads(output(images=inspect), *TENSORFOLD)["images"] == []


@pytest.mark.parametrize("text, message", [
    ("", "line 1 is '', expected kit_tree=..."),
    (output().replace("patches_tree=", "patches="), "line 2 is 'patches=" + PATCHES + "', expected patches_tree=..."),
    (output().replace("images:\n", "img\n"), "no images: line after kit_tree, patches_tree, example, started_env"),
    (output(images="Error: no such image"), "the images output is not JSON"),
    (output(images="{}"), "the images output is a dict, expected a list"),
    (output().replace("example=", "example=%%"), "example is not base64 of UTF-8 text"),
])
def test_anything_else_fails_naming_what(text, message):
    with pytest.raises(ReadsError, match=None) as raised:
        parse_reads(text, *TENSORFOLD)
    assert message in str(raised.value)


IMAGE = [{"Id": "sha256:" + "e" * 64, "RepoTags": ["glm53-sm121:local"]}]
CONTAINER = [{"Id": "f" * 64, "Name": "/glm53-vllm", "State": {"Running": True}}]


def vllm_output(trees="1" * 40 + " " + "2" * 40, base_id="sha256:" + "9" * 64, image=None, container=None):
    """As the task prints it; ``image``/``container`` None: the inspect of one, [] (or nothing): none."""
    image, container = IMAGE if image is None else image, CONTAINER if container is None else container
    return "trees=%s\nbase_id=%s\nimage:\n%s\ncontainer:\n%s\n" % (
        trees, base_id, json.dumps(image, indent=4) if image else "[]", json.dumps(container, indent=4) if container else "")


def test_the_vllm_heads_read_has_each_section_apart():
    reads = parse_reads(vllm_output(), *VLLM)
    assert reads == {"trees": "1" * 40 + " " + "2" * 40, "base_id": "sha256:" + "9" * 64, "image": IMAGE,
                     "container": CONTAINER}


def test_a_vllm_worker_without_a_rank_has_empty_sections():
    reads = parse_reads(vllm_output(trees="", base_id="", image=[], container=[]), *VLLM)
    assert reads == {"trees": "", "base_id": "", "image": [], "container": []}


def test_a_missing_second_section_is_named():
    with pytest.raises(ReadsError) as raised:
        parse_reads(vllm_output().split("container:")[0], *VLLM)
    assert "no container: line after trees, base_id, image" in str(raised.value)
