"""The ranks of the operations plan (ops.json) from the cluster contract (_ops_plan): head first,
how the head reaches each worker, the container names of each path, the link netdevs and, for
each HCA NCCL runs on, the netdev and address whose GID index a heal recomputes."""

import copy


from ansible_collections.dgx_spark.glm53.plugins.module_utils import _ops
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_plan as vp
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._ops_plan import ops_ranks, rank_links
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.plugin_utils.vllm_fixtures import options

HCAS = ["rocep1s0f1", "roceP2p1s0f1"]


def node(address, gid_index=None, rank=0):
    return {"rank": rank, "role": "head" if rank == 0 else "worker", "link_address": address,
            "netdev": "enp1s0f1np1", "hcas": list(HCAS),
            "gid_index": dict(gid_index or {"rocep1s0f1": 3, "roceP2p1s0f1": 3}),
            "env": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
                    "NCCL_IB_HCA": ",".join(HCAS), "NCCL_IB_GID_INDEX": "3"}}


def contract(gid_index=None):
    return {
        "schema": 1, "path": "vllm", "head": "spark-head", "workers": ["spark-worker"],
        "master_address": "198.18.1.10", "master_port": 25053, "ssh_user": "spark",
        "links": [
            {"netdev": "enp1s0f1np1", "addresses": {"spark-head": "198.18.1.10", "spark-worker": "198.18.1.11"},
             "primary": True},
            {"netdev": "enP2p1s0f1np1", "addresses": {"spark-head": "198.18.2.10", "spark-worker": "198.18.2.11"},
             "primary": False},
        ],
        "nodes": {"spark-head": node("198.18.1.10", gid_index), "spark-worker": node("198.18.1.11", gid_index, 1)},
    }


WORKER_GIDS = [{"hca": "rocep1s0f1", "netdev": "enp1s0f1np1", "ipv4": "198.18.1.11"},
               {"hca": "roceP2p1s0f1", "netdev": "enP2p1s0f1np1", "ipv4": "198.18.2.11"}]


# -- rank_links -------------------------------------------------------------------------------


def test_rank_links_every_netdev_and_a_gid_entry_per_hca():
    netdevs, gids = rank_links(contract(), "spark-worker")
    assert netdevs == ["enp1s0f1np1", "enP2p1s0f1np1"]
    assert gids == WORKER_GIDS


def test_rank_links_only_the_hcas_in_nccl_ib_hca():
    one = contract()
    one["nodes"]["spark-worker"]["env"]["NCCL_IB_HCA"] = "rocep1s0f1"
    netdevs, gids = rank_links(one, "spark-worker")
    assert netdevs == ["enp1s0f1np1", "enP2p1s0f1np1"]  # the links are still watched
    assert gids == [{"hca": "rocep1s0f1", "netdev": "enp1s0f1np1", "ipv4": "198.18.1.11"}]


def test_rank_links_the_second_hca_alone():
    one = contract()
    one["nodes"]["spark-head"]["env"]["NCCL_IB_HCA"] = "roceP2p1s0f1"
    assert rank_links(one, "spark-head")[1] == [{"hca": "roceP2p1s0f1", "netdev": "enP2p1s0f1np1",
                                                 "ipv4": "198.18.2.10"}]


def test_rank_links_without_nccl_ib_hca_takes_every_hca():
    one = contract()
    del one["nodes"]["spark-worker"]["env"]["NCCL_IB_HCA"]
    assert rank_links(one, "spark-worker")[1] == WORKER_GIDS


def test_rank_links_an_hca_without_a_link_or_an_address_has_no_entry():
    one = contract()
    one["links"] = one["links"][:1]
    assert rank_links(one, "spark-worker") == (["enp1s0f1np1"], WORKER_GIDS[:1])
    two = contract()
    del two["links"][1]["addresses"]["spark-worker"]
    assert rank_links(two, "spark-worker")[1] == WORKER_GIDS[:1]


def test_rank_links_without_links():
    one = contract()
    del one["links"]
    assert rank_links(one, "spark-head") == ([], [])


# -- ops_ranks --------------------------------------------------------------------------------


def test_ops_ranks_tensorfold_head_first():
    ranks = ops_ranks(contract(), "tensorfold")
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["node"] for r in ranks] == ["spark-head", "spark-worker"]
    assert [r["ssh"] for r in ranks] == [None, "spark@198.18.1.11"]
    assert [r["container"] for r in ranks] == ["glm53-tf-r0", "glm53-tf-r1"]
    assert ranks[1]["gids"] == WORKER_GIDS
    assert ranks[0]["gids"][0] == {"hca": "rocep1s0f1", "netdev": "enp1s0f1np1", "ipv4": "198.18.1.10"}
    assert all("spec" not in r for r in ranks)


def test_ops_ranks_vllm_container_names_and_specs_per_node():
    specs = {"spark-head": {"name": "glm53-vllm", "rank": "head"}, "spark-worker": {"name": "glm53-vllm", "rank": 1}}
    ranks = ops_ranks(contract(), "vllm", specs=specs)
    assert [r["container"] for r in ranks] == ["glm53-vllm", "glm53-vllm"]
    assert ranks[0]["spec"] is specs["spark-head"]
    assert ranks[1]["spec"] is specs["spark-worker"]


def test_ops_ranks_ssh_user_and_address_of_the_contract():
    one = contract()
    one["ssh_user"] = "deploy"
    one["nodes"]["spark-worker"]["link_address"] = "198.18.9.9"
    assert ops_ranks(one, "tensorfold")[1]["ssh"] == "deploy@198.18.9.9"


def test_ops_ranks_evict_and_disk_paths_per_node_with_home_by_default():
    ranks = ops_ranks(contract(), "vllm", evict_paths={"spark-head": ["/models/glm"]},
                      disk_paths={"spark-worker": ["/data", "/home/spark"]})
    assert ranks[0]["evict_paths"] == ["/models/glm"]
    assert ranks[1]["evict_paths"] == []
    assert ranks[0]["disk_paths"] == ["~"]
    assert ranks[1]["disk_paths"] == ["/data", "/home/spark"]
    assert ops_ranks(contract(), "vllm")[0]["disk_paths"] == ["~"]


def test_ops_ranks_netdevs_per_rank():
    for entry in ops_ranks(contract(), "tensorfold"):
        assert entry["netdevs"] == ["enp1s0f1np1", "enP2p1s0f1np1"]


def test_ops_ranks_head_alone():
    one = contract()
    one["workers"] = []
    ranks = ops_ranks(one, "vllm")
    assert len(ranks) == 1 and ranks[0]["ssh"] is None


def test_ops_ranks_does_not_change_the_contract():
    one = contract()
    before = copy.deepcopy(one)
    ops_ranks(one, "tensorfold", evict_paths={"spark-head": ["/x"]})
    assert one == before


# -- with the vllm_nvfp4 role's own plan -------------------------------------------------------


class FakeCluster(object):
    """What _ops.nccl_overrides uses of a Cluster, with each node's GID table answered here."""

    class Rank(object):
        def __init__(self, rank, node):
            self.rank, self.node = rank, node

    def __init__(self, ranks, tables):
        self.entries = dict((entry["rank"], entry) for entry in ranks)
        self.ranks = [self.Rank(entry["rank"], entry["node"]) for entry in ranks]
        self.tables = tables
        self.config = {}

    def each(self, function):
        return [function(rank) for rank in self.ranks]

    def on_node(self, rank, action, query):
        assert action == "node-facts"
        table = self.tables[rank.node]
        return {"gid_index": dict((item["hca"], table.get(item["hca"])) for item in query["gids"])}, None


def test_a_heal_recomputes_the_one_gid_index_of_a_two_hca_plan():
    cluster = contract()
    plan = vp.cluster_plan(cluster, options())
    assert plan["errors"] == []
    ranks = ops_ranks(cluster, "vllm", specs=plan["ranks"])
    tables = {"spark-head": {"rocep1s0f1": 3, "roceP2p1s0f1": 3},
              "spark-worker": {"rocep1s0f1": 5, "roceP2p1s0f1": 5}}
    overrides, notes, problems = _ops.nccl_overrides(FakeCluster(ranks, tables))
    assert problems == []
    assert overrides == {0: {"NCCL_IB_GID_INDEX": "3"}, 1: {"NCCL_IB_GID_INDEX": "5"}}
    assert notes == ["spark-worker: NCCL_IB_GID_INDEX moved from 3 to 5; the rank starts with 5"]


def test_single_hca_plan_recomputes_the_gid_of_the_hca_the_ranks_use():
    differ = {"rocep1s0f1": 3, "roceP2p1s0f1": 5}
    cluster = contract(gid_index=differ)
    plan = vp.cluster_plan(cluster, options(single_hca=True))
    assert plan["errors"] == []
    assert plan["ranks"]["spark-worker"]["env"]["NCCL_IB_HCA"] == "rocep1s0f1"
    ranks = ops_ranks(cluster, "vllm", specs=plan["ranks"])
    overrides, _notes, problems = _ops.nccl_overrides(FakeCluster(ranks, {"spark-head": differ,
                                                                          "spark-worker": differ}))
    assert problems == []
    assert overrides == {0: {"NCCL_IB_GID_INDEX": "3"}, 1: {"NCCL_IB_GID_INDEX": "3"}}
    assert [len(r["gids"]) for r in ranks] == [1, 1]
