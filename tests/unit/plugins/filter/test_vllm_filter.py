"""The vllm_nvfp4 role's filters: the names the role calls, their answers as plugin_utils gives
them, and an input the functions cannot take failing the task by the filter's name."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.filter import vllm
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_plan as vp
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_profile as pr
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.plugin_utils.vllm_fixtures import (
    IMAGE_ID,
    contract,
    options,
)


def test_the_filters_the_role_calls():
    assert sorted(vllm.FilterModule().filters()) == [
        "vllm_cluster_plan", "vllm_image_build", "vllm_image_id", "vllm_image_mismatch", "vllm_image_ship",
        "vllm_node_count_problem", "vllm_node_reads", "vllm_plan_changes", "vllm_profile", "vllm_rank_workers", "vllm_start_errors"]


def test_start_errors_name_each_node_and_rank_whose_container_did_not_start():
    hosts = [{"inventory_hostname": "head"},
             {"inventory_hostname": "w1", "__vllm_nvfp4_rank_start": {"changed": True}},
             {"inventory_hostname": "w2", "__vllm_nvfp4_rank_start": {"failed": True, "msg": "no such image "}}]
    assert vllm.vllm_start_errors(hosts) == ["w2: rank 2 did not start: no such image"]
    assert vllm.vllm_start_errors(hosts[:2]) == []


def test_a_node_read_that_is_not_in_its_form_fails_naming_the_filter():
    with pytest.raises(AnsibleFilterError, match="vllm_node_reads: ReadsError: line 1 is 'Error', expected recipe_head="):
        vllm.vllm_node_reads("Error")


def test_image_id_reads_dockers_inspect_list_and_absence_is_empty():
    assert vllm.vllm_image_id([{"Id": "sha256:" + "a" * 64}]) == "sha256:" + "a" * 64
    assert vllm.vllm_image_id([]) == ""


def test_rank_workers_name_each_workers_rank_over_its_link_and_its_image():
    workers = vllm.vllm_rank_workers(["w1", "w2"], {"w1": "spark@10.0.0.2", "w2": "spark@10.0.0.3"},
                                     {"w2": "sha256:" + "b" * 64})
    assert workers == [
        {"ssh": "spark@10.0.0.2", "container": "glm53-vllm", "node": "w1"},
        {"ssh": "spark@10.0.0.3", "container": "glm53-vllm", "node": "w2", "image": "sha256:" + "b" * 64}]


def test_the_filters_answer_as_plugin_utils_does():
    assert vllm.vllm_node_count_problem("spark-a", ("spark-b", "spark-c")) == vp.node_count_problem(
        "spark-a", ["spark-b", "spark-c"])
    assert vllm.vllm_profile({"vllm_nvfp4_max_num_seqs": "16"}) == pr.profile_problems({"vllm_nvfp4_max_num_seqs": 16})
    result = vllm.vllm_cluster_plan(contract(), options())
    assert result == vp.cluster_plan(contract(), options()) and result["errors"] == []
    assert vllm.vllm_plan_changes({"spark-a": None}, result["plan_hash"]) == []
    assert vllm.vllm_image_build([], "i", "r")["build"] is True
    assert vllm.vllm_image_ship(IMAGE_ID, (("spark-b", ""),)) == ["spark-b"]
    assert vllm.vllm_image_mismatch({"spark-a": IMAGE_ID, "spark-b": ""}, "x:y").startswith(
        "[vllm_nvfp4.image] x:y differs after shipping: spark-a=sha256:aaaaaaaaaaaa spark-b=missing;")


def test_an_input_the_function_cannot_take_fails_by_the_filters_name():
    with pytest.raises(AnsibleFilterError, match=r"^vllm_image_ship: IndexError: "):
        vllm.vllm_image_ship(IMAGE_ID, [["spark-b"]])
