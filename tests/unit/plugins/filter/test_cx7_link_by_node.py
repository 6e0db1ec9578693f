"""cx7_link gathers and probes on every node at once and hands the checks each node's own
registered result ({node: result}, no ``item``): the judgment is the one the loop results of
a task delegated node by node gave, for a healthy pair and for an unreachable worker, and a
node with nothing registered is judged "not gathered", never skipped."""

import copy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugin_utils"))

import cx7_fixtures as fx  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.dgx_spark.glm53.plugins.filter.cx7_link import cx7_link_by_node  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_preflight import evaluate, probe_plan  # noqa: E402

HEAD, WORKER = fx.HEAD, fx.WORKER


def per_node(results, name):
    """What hostvars hold after a task run on every node registered ``name`` (no ``item`` key)."""
    out = {}
    for entry in results:
        entry = copy.deepcopy(entry)
        out.setdefault(entry.pop("item"), {})[name] = entry
    return out


def test_a_healthy_pair_is_judged_the_same_per_node_as_from_a_delegated_loop():
    cfg, results, probes, listen = fx.healthy()
    hostvars = per_node(results, "facts")
    for node, values in per_node(probes, "probes").items():
        hostvars[node].update(values)
    facts = cx7_link_by_node([HEAD, WORKER], hostvars, "facts")
    assert probe_plan(cfg, facts) == probe_plan(cfg, results)
    by_node = evaluate(cfg, facts, cx7_link_by_node([HEAD, WORKER], hostvars, "probes"), listen)
    assert by_node == evaluate(cfg, results, probes, listen)
    assert by_node["status"] == "ok" and by_node["nodes"] == {HEAD: "ok", WORKER: "ok"}


def test_an_unreachable_worker_fails_per_node_as_it_did_in_the_loop():
    cfg, results, _probes, _listen = fx.healthy()
    results[1] = {"item": WORKER, "changed": False, "unreachable": True,
                  "msg": "Failed to connect to the host via ssh: ssh: connect to host spark-worker port 22: No route"}
    _plan, probes, listen = fx.probe(cfg, results)
    probes = [p if p["item"] != WORKER else fx.skipped_probe(WORKER) for p in probes]
    hostvars = per_node(results, "facts")
    for node, values in per_node(probes, "probes").items():
        hostvars[node].update(values)
    report = evaluate(cfg, cx7_link_by_node([HEAD, WORKER], hostvars, "facts"),
                      cx7_link_by_node([HEAD, WORKER], hostvars, "probes"), listen)
    assert report == evaluate(cfg, results, probes, listen)
    assert report["nodes"] == {HEAD: "ok", WORKER: "fail"}


def test_a_node_with_nothing_registered_is_not_gathered():
    cfg, results, _probes, _listen = fx.healthy()
    hostvars = per_node(results, "facts")
    hostvars[WORKER] = {}  # in the play, but the gather never registered for it
    facts = cx7_link_by_node([HEAD, WORKER], hostvars, "facts")
    assert facts[WORKER] == {}
    report = evaluate(cfg, facts)
    (fail,) = fx.find(report, "node.reachable", WORKER)
    assert fail["status"] == "fail" and fail["found"] == "not gathered"


def test_under_serial_a_node_outside_the_batch_comes_from_the_delegated_loop():
    # Batch 2 of serial: 1 holds the worker; the head's own result is an earlier batch's, and
    # the delegated loop's fresh one for the head wins over it.
    cfg, results, probes, listen = fx.healthy()
    hostvars = per_node(results, "facts")
    hostvars[HEAD]["facts"] = {"changed": False, "failed": True, "msg": "an earlier batch's stale result"}
    others = [entry for entry in results if entry["item"] == HEAD]
    facts = cx7_link_by_node([HEAD, WORKER], hostvars, "facts", others)
    assert facts[HEAD] == others[0] and facts[WORKER] == hostvars[WORKER]["facts"]
    assert evaluate(cfg, facts, probes, listen) == evaluate(cfg, results, probes, listen)
