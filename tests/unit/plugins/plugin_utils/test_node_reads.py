"""A path role's one read per node (tensorfold and vllm_nvfp4: install.yml): parsed into
its values and JSON sections; anything else in its place fails naming the line."""

import base64
import json
import shlex
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._node_reads import (
    TENSORFOLD,
    VLLM,
    ReadsError,
    checkout_current,
    checkout_read,
    node_reads,
    parse_reads,
)

TREE, PATCHES = "a" * 40, "b" * 40
KIT, PROFILE = "1a" * 20, "2b" * 20
KIT_URL, PROFILE_URL = "git://198.18.0.1/kit.git", "git://198.18.0.1/profile.git"
PROD_ENV = "e" * 64 + " 600"
CHECKOUTS = "kit_head=%s\nkit_url=%s\nkit_clean=yes\nprofile_head=%s\nprofile_url=%s\nprofile_clean=yes\n" % (
    KIT, KIT_URL, PROFILE, PROFILE_URL)
EXAMPLE = "GLM53_TF_BATCH=8\nGLM53_TF_BATCH_PIECE=4096\n"
STARTED = "c" * 64 + "\n"
IMAGES = [{"Id": "sha256:" + "d" * 64, "RepoTags": ["glm53-tensorfold:lp9001"]}]


def b64(text):
    return base64.b64encode(text.encode()).decode()


def output(kit_tree=TREE, example=EXAMPLE, started=STARTED, images=json.dumps(IMAGES, indent=4), checkouts=CHECKOUTS,
           prod_env=PROD_ENV):
    """As the task's checkout function, printf and docker image inspect print it."""
    return checkouts + "kit_tree=%s\npatches_tree=%s\nexample=%s\nstarted_env=%s\nprod_env=%s\nimages:\n%s" % (
        kit_tree, PATCHES, b64(example) if example else "", b64(started) if started else "", prod_env, images)


def test_the_heads_read():
    assert parse_reads(output(), *TENSORFOLD) == {
        "kit_head": KIT, "kit_url": KIT_URL, "kit_clean": "yes", "profile_head": PROFILE, "profile_url": PROFILE_URL,
        "profile_clean": "yes", "kit_tree": TREE, "patches_tree": PATCHES, "example": EXAMPLE, "started_env": STARTED,
        "prod_env": PROD_ENV, "images": IMAGES}


def test_the_workers_read_has_no_kit_example_or_started_env():
    reads = parse_reads(output(kit_tree="", example="", started=""), *TENSORFOLD)
    assert (reads["kit_tree"], reads["example"], reads["started_env"]) == ("", "", "")
    assert reads["patches_tree"] == PATCHES


@pytest.mark.parametrize("inspect", ["", "[]\n"])
def test_no_image_is_an_empty_list(inspect):
    assert parse_reads(output(images=inspect), *TENSORFOLD)["images"] == []


@pytest.mark.parametrize("text, message", [
    ("", "line 1 is '', expected kit_head=..."),
    (output().replace("patches_tree=", "patches="), "line 8 is 'patches=" + PATCHES + "', expected patches_tree=..."),
    (output().replace("images:\n", "img\n"),
     "no images: line after kit_head, kit_url, kit_clean, profile_head, profile_url, profile_clean, kit_tree, "
     "patches_tree, example, started_env, prod_env"),
    (output(images="Error: no such image"), "the images output is not JSON"),
    (output(images="{}"), "the images output is a dict, expected a list"),
    (output().replace("example=", "example=%%"), "example is not base64 of UTF-8 text"),
])
def test_anything_else_fails_naming_what(text, message):
    with pytest.raises(ReadsError, match=None) as raised:
        parse_reads(text, *TENSORFOLD)
    assert message in str(raised.value)


@pytest.mark.parametrize("change, current", [
    ({}, True),
    ({"kit_head": "3" * 40}, False),            # another commit checked out
    ({"kit_head": ""}, False),                  # no repository there yet
    ({"kit_url": "git://elsewhere/kit.git"}, False),  # the git task would set the remote
    ({"kit_clean": "no"}, False),               # tracked changes or a submodule off its commit
])
def test_a_checkout_is_current_only_at_its_commit_from_its_repo_and_unchanged(change, current):
    reads = dict(parse_reads(output(), *TENSORFOLD), **change)
    assert checkout_current(reads, "kit", KIT, KIT_URL) is current
    assert checkout_current(reads, "profile", PROFILE, PROFILE_URL) is True


def test_a_pin_in_capitals_is_the_same_commit_and_no_pin_is_never_current():
    reads = parse_reads(output(), *TENSORFOLD)
    assert checkout_current(reads, "kit", KIT.upper(), KIT_URL) is True
    assert checkout_current(reads, "kit", "", KIT_URL) is False


IMAGE = [{"Id": "sha256:" + "e" * 64, "RepoTags": ["glm53-sm121:local"]}]
CONTAINER = [{"Id": "f" * 64, "Name": "/glm53-vllm", "State": {"Running": True}}]


RECIPE = "3c" * 20
RECIPE_URL = "git://198.18.0.1/recipe.git"
CACHE = "/home/spark/.cache/glm53-vllm"


def vllm_output(trees="1" * 40 + " " + "2" * 40 + " ", base_id="sha256:" + "9" * 64, image=None, container=None,
                recipe=RECIPE, cache_mode="755"):
    """As the task prints it; ``image``/``container`` None: the inspect of one, [] (or nothing): none."""
    image, container = IMAGE if image is None else image, CONTAINER if container is None else container
    checkout = "recipe_head=%s\nrecipe_url=%s\nrecipe_clean=%s\n" % (
        recipe, RECIPE_URL if recipe else "", "yes" if recipe else "no")
    return checkout + "trees=%s\nbase_id=%s\ncache_dir=%s\ncache_mode=%s\nimage:\n%s\ncontainer:\n%s\n" % (
        trees, base_id, CACHE, cache_mode, json.dumps(image, indent=4) if image else "[]",
        json.dumps(container, indent=4) if container else "")


def test_the_vllm_heads_read_has_each_section_apart():
    reads = node_reads(vllm_output(), VLLM, {"recipe": {"commit": RECIPE, "repo": RECIPE_URL}})
    assert reads == {"recipe_head": RECIPE, "recipe_url": RECIPE_URL, "recipe_clean": "yes",
                     "trees": "1" * 40 + " " + "2" * 40, "base_id": "sha256:" + "9" * 64, "cache_dir": CACHE,
                     "cache_mode": "755", "image": IMAGE, "container": CONTAINER, "recipe_current": True}


def test_a_vllm_worker_without_a_rank_has_empty_sections_and_no_checkout_to_judge():
    reads = node_reads(vllm_output(recipe="", trees="", base_id="", image=[], container=[], cache_mode=""), VLLM)
    assert reads == {"recipe_head": "", "recipe_url": "", "recipe_clean": "no", "trees": "", "base_id": "",
                     "cache_dir": CACHE, "cache_mode": "", "image": [], "container": []}


def test_a_missing_second_section_is_named():
    with pytest.raises(ReadsError) as raised:
        parse_reads(vllm_output().split("container:")[0], *VLLM)
    assert "no container: line after recipe_head, recipe_url, recipe_clean, trees, base_id, cache_dir, cache_mode, image" \
        in str(raised.value)


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=lab@example.invalid", "-c", "user.name=lab"] + list(args),
                   check=True, capture_output=True)


def _read(path_sh, name):
    """The read's checkout lines, run by bash as the path roles' read runs them."""
    proc = subprocess.run(["bash", "-c", "set -eu\n" + checkout_read(path_sh, name)], check=True,
                          capture_output=True, text=True)
    return dict(line.split("=", 1) for line in proc.stdout.splitlines())


def test_the_checkout_shell_reads_head_remote_and_tracked_changes(tmp_path):
    repo = tmp_path / "recipe"
    assert _read(shlex.quote(str(repo)), "recipe") == {"recipe_head": "", "recipe_url": "", "recipe_clean": "no"}
    _git(tmp_path, "init", "-q", str(repo))
    (repo / "f").write_text("one\n")
    _git(repo, "add", "f")
    _git(repo, "commit", "-qm", "one")
    _git(repo, "remote", "add", "origin", RECIPE_URL)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    found = _read(shlex.quote(str(repo)), "recipe")
    assert found == {"recipe_head": head, "recipe_url": RECIPE_URL, "recipe_clean": "yes"}
    (repo / "untracked").write_text("left alone by the git module too\n")
    assert _read(shlex.quote(str(repo)), "recipe")["recipe_clean"] == "yes"
    (repo / "f").write_text("changed\n")
    assert _read(shlex.quote(str(repo)), "recipe")["recipe_clean"] == "no"
    # A node without this checkout prints the keys empty.
    assert _read("", "kit") == {"kit_head": "", "kit_url": "", "kit_clean": "no"}
