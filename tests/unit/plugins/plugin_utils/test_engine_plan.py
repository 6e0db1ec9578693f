"""Leave alone, start or restart: one decision for both paths."""

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _engine_plan as ep

LP9001 = "sha256:" + "c" * 64
REBUILT = "sha256:" + "d" * 64
IDS = ["a" * 64, "b" * 64]


def probe(ready=True, busy=False, states=("running", "running"), images=(LP9001, LP9001), reason=None):
    ranks = [{"rank": number, "node": "spark-head" if number == 0 else "spark-worker",
              "container": "glm53-tf-r%d" % number, "state": state, "id": IDS[number] if state != "absent" else None,
              "image": image if state != "absent" else None}
             for number, (state, image) in enumerate(zip(states, images))]
    return {"ready": ready, "busy": busy, "ranks": ranks, "reason": reason}


def test_a_healthy_service_is_left_alone():
    plan = ep.run_plan(probe(), images={0: LP9001, 1: LP9001})
    assert plan["action"] == "none" and plan["reason"] == "healthy" and plan["previous_ids"] == IDS


def test_busy_is_left_alone_and_said():
    plan = ep.run_plan(probe(busy=True), images={0: LP9001, 1: LP9001})
    assert plan == {"action": "none", "reason": "busy with requests in flight, healthy", "previous_ids": IDS,
                    "busy": True}


def test_a_rebuilt_image_on_one_node_restarts_both():
    plan = ep.run_plan(probe(), images={0: LP9001, 1: REBUILT})
    assert plan["action"] == "restart"
    assert plan["reason"] == ("rank 1 (glm53-tf-r1 on spark-worker) runs image cccccccccccc, "
                              "the image there now is dddddddddddd")


def test_config_change_is_judged_against_what_the_ranks_started_from():
    assert ep.config_change("x1", started="x1\n", written=True) is None  # rewritten to the same
    assert ep.config_change("x2", started="x1") == "config/prod.env changed since the ranks started"
    assert ep.config_change("x2", started="", written=True) == "config/prod.env changed in this run"
    assert ep.config_change("x2", started=None, written=False) is None
    plan = ep.run_plan(probe(), images={0: LP9001, 1: LP9001}, config={"now": "x2", "started": "x1"})
    assert plan["action"] == "restart" and plan["reason"] == "config/prod.env changed since the ranks started"


def test_unhealthy_ranks_are_restarted_and_no_ranks_started():
    plan = ep.run_plan(probe(ready=False, reason="canary failed"), images={})
    assert (plan["action"], plan["reason"]) == ("restart", "canary failed")
    half = ep.run_plan(probe(ready=False, states=("running", "absent"), reason="rank 1 does not exist"))
    assert half["action"] == "restart" and half["previous_ids"] == IDS[:1]
    none = ep.run_plan(probe(ready=False, states=("absent", "absent"), reason="rank 0 does not exist"))
    assert none["action"] == "start" and none["previous_ids"] == []
