"""Contract test from captured real output: a DGX Spark's ibdev2netdev, `ip addr` and
RDMA sysfs listing (tests/unit/fixtures/dgx_spark_real, sources cited there) go through
the module's parsing and join_ports, then through the controller's evaluate, to the NCCL
settings the engines get. Only the GPU, memory and disk parts of the node's facts are
the fixtures' defaults: the captures are of the link."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cx7_fixtures as fx  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.modules.test_ibdev2netdev_facts import (  # noqa: E402
    observations_from_fixture,
)

HEAD = fx.HEAD


def node_facts_from_capture(address):
    """What spark_node_facts returns on that node: the module's port map under ``link``."""
    module = observations_from_fixture("spark-0e68", address=address)
    assert module["failed"] is False, module
    facts = fx.facts(HEAD, 10)
    facts["link"] = dict(module["ansible_facts"]["ibdev2netdev"], error=None)
    return facts


def test_real_spark_capture_gives_the_nccl_settings_of_its_link():
    cfg = fx.config(workers=[])
    cfg["nodes"][HEAD]["address"] = "10.100.184.1"
    report = fx.evaluate(cfg, [node_facts_from_capture("10.100.184.1")])
    assert report["failures"] == [], [c["message"] for c in report["failures"]]
    assert report["nccl"][HEAD] == {
        # ibdev2netdev shows the p1 functions (Up): the cabled cage, both rails.
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1",
        "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
        "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
        # gids/3 is RoCE v2 ::ffff:10.100.184.1 on rocep1s0f1 ("GID 3 = RoCE v2 on both rails").
        "NCCL_IB_GID_INDEX": "3",
    }
    assert report["contract"]["master_address"] == "10.100.184.1"
    assert report["contract"]["nodes"][HEAD]["gid_index"] == {"rocep1s0f1": 3, "roceP2p1s0f1": 3}


def test_real_spark_capture_with_nothing_configured_derives_the_same():
    cfg = fx.config(workers=[])
    cfg["nodes"][HEAD]["address"] = ""
    report = fx.evaluate(cfg, [node_facts_from_capture(None)])
    assert report["nccl"][HEAD]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert report["nccl"][HEAD]["NCCL_IB_GID_INDEX"] == "3"
    assert report["contract"]["master_address"] == "10.100.184.1"
