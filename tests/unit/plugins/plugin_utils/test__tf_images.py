"""What a node must build, judged from docker image inspect output and git trees."""

import hashlib

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_images import image_state, input_hash
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_run import start_failure

DEV, LP = "glm53-tensorfold:dev", "glm53-tensorfold:lp9001"
KIT, PATCHES = "a" * 40, "b" * 40


def inspect(tag, labels=None, image_id="sha256:1"):
    return {"Id": image_id, "RepoTags": [tag], "Config": {"Labels": labels}}


def test_the_input_hash_is_sha256_of_the_trees_and_the_base():
    text = "kit=%s\npatches=%s\nbase=%s\n" % (KIT, PATCHES, DEV)
    assert input_hash(KIT, PATCHES, DEV) == hashlib.sha256(text.encode()).hexdigest()
    assert input_hash(KIT, "c" * 40, DEV) != input_hash(KIT, PATCHES, DEV)


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
