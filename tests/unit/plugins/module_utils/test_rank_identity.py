"""READY only of ranks a start made: container ids from before the start, and image ids."""

import json

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _rank_identity as ri
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _readiness as rd

OLD = "a" * 64
NEW = "b" * 64
LP9001 = "sha256:" + "c" * 64
REBUILT = "sha256:" + "d" * 64


def rank(number=0, state="running", cid=NEW, image=LP9001):
    node, container = ("spark-head", "glm53-tf-r0") if number == 0 else ("spark-worker", "glm53-tf-r%d" % number)
    return {"rank": number, "node": node, "container": container, "state": state, "id": cid, "image": image,
            "started_at": "2026-12-01T21:00:00.5Z"}


def test_a_new_container_on_the_expected_image_is_fine():
    assert ri.identity_reason(rank(), previous_ids=[OLD], image=LP9001) is None
    assert ri.identity_problems([rank(0), rank(1)], previous_ids=[OLD], images={0: LP9001, 1: LP9001}) == []


def test_the_container_from_before_the_start_is_named_with_the_fix():
    reason = ri.identity_reason(rank(1, cid=OLD), previous_ids=[OLD, "e" * 64])
    assert reason == ("rank 1 (glm53-tf-r1 on spark-worker) is still the container from before this start "
                      "(id aaaaaaaaaaaa, started 2026-12-01T21:00:00.5Z): stop both ranks and start again "
                      "(serve.sh restart), so both run what this start was for")


def test_a_rank_on_another_image_is_named():
    reason = ri.identity_reason(rank(0, image=LP9001), image=REBUILT)
    assert reason.startswith("rank 0 (glm53-tf-r0 on spark-head) runs image cccccccccccc, want dddddddddddd")


@pytest.mark.parametrize("state", ["absent", "exited", "oom", "unreachable", "unknown"])
def test_only_existing_ranks_are_judged_here(state):
    assert ri.identity_reason(rank(state=state, cid=OLD), previous_ids=[OLD], image=REBUILT) is None


def test_no_expectation_accepts_any_rank():
    assert ri.identity_problems([rank(cid=OLD)]) == []


def test_rank_state_reads_the_id_image_and_start_time_docker_prints():
    state = {"Status": "running", "Running": True, "Pid": 4242, "ExitCode": 0, "OOMKilled": False,
             "StartedAt": "2026-12-01T21:00:00.5Z"}
    stdout = json.dumps({"Id": NEW, "Image": LP9001, "State": state})
    judged = rd.rank_state(0, stdout)
    assert (judged["state"], judged["id"], judged["image"], judged["started_at"]) == (
        "running", NEW, LP9001, "2026-12-01T21:00:00.5Z")


def test_the_inspect_command_asks_for_id_image_and_state():
    assert rd.inspect_command("glm53-tf-r1") == (
        "docker inspect --type container --format "
        "'{\"Id\":{{json .Id}},\"Image\":{{json .Image}},\"State\":{{json .State}}}' glm53-tf-r1")
