"""The tensorfold role's one read per node (install.yml): parsed into the trees, the C8 example,
the started-from hash and the images; anything else in its place fails naming the line."""

import base64
import json

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_reads import ReadsError, parse_reads

TREE, PATCHES = "a" * 40, "b" * 40
EXAMPLE = "GLM53_TF_BATCH=8\nGLM53_TF_BATCH_PIECE=4096\n"
STARTED = "c" * 64 + "\n"
IMAGES = [{"Id": "sha256:" + "d" * 64, "RepoTags": ["glm53-tensorfold:lp9001"]}]


def output(kit_tree=TREE, example=EXAMPLE, started=STARTED, images=json.dumps(IMAGES, indent=4)):
    """As the task's printf and docker image inspect print it."""
    b64 = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    return "kit_tree=%s\npatches_tree=%s\nexample=%s\nstarted_env=%s\nimages:\n%s" % (
        kit_tree, PATCHES, b64(example) if example else "", b64(started) if started else "", images)


def test_the_heads_read():
    assert parse_reads(output()) == {"kit_tree": TREE, "patches_tree": PATCHES, "example": EXAMPLE,
                                     "started_env": STARTED, "images": IMAGES}


def test_the_workers_read_has_no_kit_example_or_started_env():
    reads = parse_reads(output(kit_tree="", example="", started=""))
    assert (reads["kit_tree"], reads["example"], reads["started_env"]) == ("", "", "")
    assert reads["patches_tree"] == PATCHES


@pytest.mark.parametrize("inspect", ["", "[]\n"])
def test_no_image_is_an_empty_list(inspect):
    assert parse_reads(output(images=inspect))["images"] == []


@pytest.mark.parametrize("text, message", [
    ("", "line 1 is '', expected kit_tree=..."),
    (output().replace("patches_tree=", "patches="), "line 2 is 'patches=" + PATCHES + "', expected patches_tree=..."),
    (output().replace("images:\n", "img\n"), "no images: line after kit_tree, patches_tree, example, started_env"),
    (output(images="Error: no such image"), "the image inspect output is not JSON"),
    (output(images="{}"), "the image inspect output is a dict, expected a list"),
    (output().replace("example=", "example=%%"), "example is not base64 of UTF-8 text"),
])
def test_anything_else_fails_naming_what(text, message):
    with pytest.raises(ReadsError, match=None) as raised:
        parse_reads(text)
    assert message in str(raised.value)
