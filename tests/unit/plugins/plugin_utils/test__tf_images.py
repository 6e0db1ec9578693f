"""What a node must build, judged from docker image inspect output and git trees.

The inputs are content: git's own tree ids of a kit repository and a profile's patches,
read as the tensorfold role reads them (roles/tensorfold/tasks/build.yml), in repositories
built here with git. Whether two inputs are the same is git's answer, not the hash's.
"""

import os
import re
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_images import image_state, input_hash
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_run import start_failure
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import require

DEV, LP = "glm53-tensorfold:dev", "glm53-tensorfold:lp9001"
KIT, PATCHES = "a" * 40, "b" * 40
# No user or system git configuration: the repositories are the same on any machine.
GIT_ENV = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="test",
               GIT_AUTHOR_EMAIL="test@example.invalid", GIT_COMMITTER_NAME="test",
               GIT_COMMITTER_EMAIL="test@example.invalid")


def inspect(tag, labels=None, image_id="sha256:1"):
    return {"Id": image_id, "RepoTags": [tag], "Config": {"Labels": labels}}


def git(repo, *args):
    return subprocess.run([require("git", "git"), "-C", str(repo)] + list(args), env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo, files, message):
    """Write ``files`` ({relative path: text}) and commit them (only them: the vendor gitlink has no checkout)."""
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if files:
        git(repo, "add", "--", *files)
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def vendor(kit, sha):
    """Point the kit's vendor/TensorFold gitlink (a submodule's commit) at ``sha`` and commit."""
    git(kit, "update-index", "--add", "--cacheinfo", "160000,%s,vendor/TensorFold" % sha)
    git(kit, "commit", "-q", "-m", "vendor TensorFold %s" % sha[:7])


def trees(kit, profile):
    """(kit tree, patches tree) as the role reads them: rev-parse HEAD^{tree} and HEAD:tensorfold/patches."""
    return git(kit, "rev-parse", "HEAD^{tree}"), git(profile, "rev-parse", "HEAD:tensorfold/patches")


@pytest.fixture(name="repos")
def fixture_repos(tmp_path):
    kit, profile = tmp_path / "kit", tmp_path / "profile"
    for repo in (kit, profile):
        repo.mkdir()
        git(repo, "init", "-q")
    commit(kit, {"scripts/serve.sh": "#!/bin/sh\n", "Dockerfile": "FROM scratch\n"}, "kit")
    vendor(kit, "1" * 40)
    commit(profile, {"README.md": "profile\n", "tensorfold/patches/Dockerfile.logprobs": "FROM glm53-tensorfold:dev\n",
                     "tensorfold/patches/overlay/cuda/server.py": "# 9001\n"}, "profile")
    return kit, profile


def labelled(kit_tree, patches_tree):
    """What the node has: the kit image, and lp9001 labelled with the inputs it was built from."""
    labels = {"dgx_spark.glm53.inputs": input_hash(kit_tree, patches_tree, DEV), "dgx_spark.glm53.kit": kit_tree}
    return [inspect(DEV), inspect(LP, labels, "sha256:2")]


def test_new_commits_with_the_same_content_need_no_build(repos):
    kit, profile = repos
    before = trees(kit, profile)
    built = labelled(*before)
    kit_head, profile_head = git(kit, "rev-parse", "HEAD"), git(profile, "rev-parse", "HEAD")
    # Other commits (later dates, other messages), a change outside the patches: the same inputs.
    assert commit(kit, {}, "an empty commit") != kit_head
    assert commit(profile, {"README.md": "profile, reworded\n"}, "docs") != profile_head
    assert trees(kit, profile) == before  # git's verdict: the content did not change
    assert re.fullmatch("[0-9a-f]{64}", input_hash(*trees(kit, profile), base=DEV))
    state = image_state(built, DEV, LP, *trees(kit, profile))
    assert (state["need_image"], state["need_base"], state["image_id"]) == (False, False, "sha256:2")


def test_a_changed_patch_rebuilds_only_the_patched_image(repos):
    kit, profile = repos
    before = trees(kit, profile)
    commit(profile, {"tensorfold/patches/overlay/cuda/server.py": "# 9001, fixed\n"}, "fix the overlay")
    after = trees(kit, profile)
    assert after[0] == before[0] and after[1] != before[1]  # git: only the patches tree changed
    assert input_hash(*after, base=DEV) != input_hash(*before, base=DEV)
    state = image_state(labelled(*before), DEV, LP, *after)
    assert (state["need_image"], state["need_base"]) == (True, False)


def test_another_vendored_tensorfold_commit_rebuilds_both_images(repos):
    kit, profile = repos
    before = trees(kit, profile)
    vendor(kit, "2" * 40)  # only the submodule's commit moved: no file in the kit changed
    after = trees(kit, profile)
    assert after[0] != before[0] and after[1] == before[1]
    assert input_hash(*after, base=DEV) != input_hash(*before, base=DEV)
    state = image_state(labelled(*before), DEV, LP, *after)
    assert (state["need_image"], state["need_base"]) == (True, True)


def test_the_base_image_and_the_place_of_each_tree_count(repos):
    kit_tree, patches_tree = trees(*repos)
    assert input_hash(kit_tree, patches_tree, DEV) != input_hash(kit_tree, patches_tree, "glm53-tensorfold:other")
    # A kit tree is not a patches tree: the same two ids the other way round are other inputs.
    assert input_hash(kit_tree, patches_tree, DEV) != input_hash(patches_tree, kit_tree, DEV)


def test_nothing_built_means_both_images():
    state = image_state([], DEV, LP, KIT, PATCHES)
    assert state["need_image"] and state["need_base"]


def test_a_current_label_means_nothing_to_build():
    labels = {"dgx_spark.glm53.inputs": input_hash(KIT, PATCHES, DEV), "dgx_spark.glm53.kit": KIT}
    state = image_state([inspect(DEV), inspect(LP, labels, "sha256:2")], DEV, LP, KIT, PATCHES)
    assert not state["need_image"] and not state["need_base"] and state["image_id"] == "sha256:2"


def test_a_changed_overlay_rebuilds_only_the_patched_image():
    labels = {"dgx_spark.glm53.inputs": input_hash(KIT, "0" * 40, DEV), "dgx_spark.glm53.kit": KIT}
    state = image_state([inspect(DEV), inspect(LP, labels)], DEV, LP, KIT, PATCHES)
    assert state["need_image"] and not state["need_base"]


def test_a_changed_kit_or_a_missing_base_rebuilds_both():
    labels = {"dgx_spark.glm53.inputs": input_hash("0" * 40, PATCHES, DEV), "dgx_spark.glm53.kit": "0" * 40}
    assert image_state([inspect(DEV), inspect(LP, labels)], DEV, LP, KIT, PATCHES)["need_base"]
    good = {"dgx_spark.glm53.inputs": input_hash(KIT, "1" * 40, DEV), "dgx_spark.glm53.kit": KIT}
    assert image_state([inspect(LP, good)], DEV, LP, KIT, PATCHES)["need_base"]


def test_failure_message_has_reason_exit_meaning_slots_and_both_ranks_lines():
    wait = {"reason": "rank-0 log reports 1 request slot(s), want 8", "slots": 1, "ranks": [
        {"container": "glm53-tf-r0", "node": "spark-head", "state": "running", "log_tail": ["a"] * 50},
        {"container": "glm53-tf-r1", "node": "spark-worker", "state": "exited", "log_tail": "x\ny"}]}
    msg = start_failure(wait, {"rc": 3}, 2, 8)
    assert msg.startswith("tensorfold: not READY after 2 start attempt(s): rank-0 log reports 1 request slot(s), want 8.")
    assert "serve.sh start exited 3 (fewer slots than GLM53_TF_BATCH)." in msg
    assert "Slots: 1 of 8." in msg and "tensorfold_evict" in msg
    assert "Last 40 lines of glm53-tf-r0 on spark-head (running):" in msg
    assert "Last 2 lines of glm53-tf-r1 on spark-worker (exited):\nx\ny" in msg
    assert msg.endswith("Both ranks were stopped; the log is ~/.local/state/glm53-tf-prod/tf-prod.log on the head.")


def test_failure_message_prefers_serve_sh_logs_of_each_rank():
    wait = {"reason": "canary", "ranks": [{"rank": 0, "container": "glm53-tf-r0", "node": "h", "state": "running"},
                                          {"rank": 1, "container": "glm53-tf-r1", "node": "w", "state": "running"}]}
    logs = [{"item": 0, "stdout": "r0 a\nr0 b"}, {"item": 1, "stdout": "r1 z"}]
    msg = start_failure(wait, {"rc": 0}, 1, 8, logs)
    assert "Last 2 lines of glm53-tf-r0 on h (running):\nr0 a\nr0 b" in msg
    assert "Last 1 lines of glm53-tf-r1 on w (running):\nr1 z" in msg
    assert msg.endswith("the log is ~/.local/state/glm53-tf-prod/tf-prod.log on the head.")
    # The log where tensorfold_state_dir puts it.
    assert start_failure(wait, {"rc": 0}, 1, 8, logs, log_path="/srv/ops/tf-prod.log").endswith(
        "the log is /srv/ops/tf-prod.log on the head.")


def test_image_entry_finds_a_tag_in_an_inspect_list():
    from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_images import image_entry
    images = [{"Id": "sha256:" + "a" * 64, "RepoTags": ["glm53-tensorfold:dev"]},
              {"Id": "sha256:" + "b" * 64, "RepoTags": ["glm53-tensorfold:lp9001", "mine:latest"]}]
    assert image_entry(images, "glm53-tensorfold:lp9001")["Id"] == "sha256:" + "b" * 64
    assert image_entry(images, "mine")["Id"] == "sha256:" + "b" * 64  # untagged means :latest
    assert image_entry(images, "glm53-tensorfold:lp9002") == {} and image_entry(None, "x") == {}
