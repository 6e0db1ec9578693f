"""_cluster_contract.validate: the one check of the contract's types and relations, run by
cluster_contract where the contract is written and read, and by the tensorfold site values.
Each refused case with the message the operator reads. And cluster.env's quoting, read back
by sh."""

import copy
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import shell_quote, validate

HEAD, WORKER = "spark-head", "spark-worker"
ENV = {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
       "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}
# As the cx7_link preflight builds it (plugin_utils/_cx7_nccl.cluster_contract).
GOOD = {
    "schema": 1, "path": "tensorfold", "head": HEAD, "workers": [WORKER],
    "master_address": "198.18.1.10", "master_port": 29551, "ssh_user": "spark",
    "links": [{"netdev": "enp1s0f1np1", "primary": True, "addresses": {HEAD: "198.18.1.10", WORKER: "198.18.1.11"}}],
    "nodes": {
        HEAD: {"rank": 0, "role": "head", "link_address": "198.18.1.10", "netdev": "enp1s0f1np1",
               "hcas": ["rocep1s0f1", "roceP2p1s0f1"], "gid_index": {"rocep1s0f1": 3, "roceP2p1s0f1": 3},
               "env": dict(ENV)},
        WORKER: {"rank": 1, "role": "worker", "link_address": "198.18.1.11", "netdev": "enp1s0f1np1",
                 "hcas": ["rocep1s0f1", "roceP2p1s0f1"], "gid_index": {"rocep1s0f1": 3, "roceP2p1s0f1": None},
                 "env": dict(ENV)},
    },
}
IPV4_FIX = ("put an IPv4 address on the CX7 link netdev (glm53_link_address, e.g. 192.168.100.10 with its prefix; "
            "cx7_link_configure: true writes it with netplan) and rerun the preflight")
SSH_USER_FIX = ("expected the user the head logs in to the workers as (cx7_link_ssh_user, by default the workers' "
                "ansible_user): set ansible_user for the workers and rerun the preflight")


def changed(path, value):
    """GOOD with the value at a dotted path replaced (``None`` as ``value`` stays None)."""
    contract = copy.deepcopy(GOOD)
    keys = path.split(".")
    target = contract
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[keys[-1]] = value
    return contract


def without(key):
    contract = copy.deepcopy(GOOD)
    del contract[key]
    return contract


def test_the_contract_the_preflight_builds_passes():
    assert validate(GOOD) == []
    # The fields later roles do not read may be absent (older contracts, hand-written tests).
    lean = copy.deepcopy(GOOD)
    del lean["links"]
    for node in lean["nodes"].values():
        del node["hcas"], node["gid_index"]
    assert validate(lean) == []
    assert validate(changed("path", "vllm")) == []


@pytest.mark.parametrize("contract, problems", [
    # The ssh user goes into user@address (hf_weights mirror, the kit's WORKER_SSH).
    (changed("ssh_user", ""), ["ssh_user is empty, " + SSH_USER_FIX]),
    (changed("ssh_user", None), ["ssh_user is missing (null), " + SSH_USER_FIX]),
    (changed("ssh_user", "spark@198.18.1.11"),
     ["ssh_user is 'spark@198.18.1.11', expected a login name (letters, digits, '_', '.', '-'; at most 32)"]),
    (without("ssh_user"), ["key ssh_user missing"]),
    # Addresses: IPv4 only.
    (changed("nodes.spark-worker.link_address", None),
     ["nodes.spark-worker.link_address is missing (null), expected the node's IPv4 address on the CX7 link"]),
    (changed("nodes.spark-worker.link_address", "fe80::1%enp1s0f1np1"),
     ["nodes.spark-worker.link_address is 'fe80::1%enp1s0f1np1', an IPv6 link-local address with a zone "
      "(enp1s0f1np1), which the engines, NCCL's RoCE GID choice and ssh cannot use here; expected an IPv4 address: "
      + IPV4_FIX]),
    (changed("nodes.spark-worker.link_address", "fd00:18::11"),
     ["nodes.spark-worker.link_address is 'fd00:18::11', an IPv6 or unknown address; expected an IPv4 address: "
      + IPV4_FIX]),
    (changed("nodes.spark-worker.link_address", "198.18.1.311"),
     ["nodes.spark-worker.link_address is '198.18.1.311', which is not an IPv4 address (expected four decimal "
      "numbers, e.g. 192.168.100.10)"]),
    (changed("nodes.spark-worker.link_address", "127.0.0.1"),
     ["nodes.spark-worker.link_address is 127.0.0.1, a loopback address; expected the node's own IPv4 address on "
      "the CX7 link"]),
    (changed("links.0.addresses.spark-worker", "fe80::1%enp1s0f1np1"),
     ["links[0].addresses.spark-worker is 'fe80::1%enp1s0f1np1', an IPv6 link-local address with a zone "
      "(enp1s0f1np1), which the engines, NCCL's RoCE GID choice and ssh cannot use here; expected an IPv4 address: "
      + IPV4_FIX]),
    (changed("master_address", None),
     ["master_address is missing (null), expected the node's IPv4 address on the CX7 link"]),
    (changed("master_address", "198.18.1.11"),
     ["master_address is 198.18.1.11, expected the head's link address '198.18.1.10'"]),
    # The port the engines rendezvous on.
    (changed("master_port", 80), ["master_port is 80, expected an integer port in 1024-65535 "
                                  "(cx7_link_master_port_<path>)"]),
    (changed("master_port", 70000), ["master_port is 70000, expected an integer port in 1024-65535 "
                                     "(cx7_link_master_port_<path>)"]),
    (changed("master_port", "29551"), ["master_port is '29551', expected an integer port in 1024-65535 "
                                       "(cx7_link_master_port_<path>)"]),
    (changed("master_port", True), ["master_port is True, expected an integer port in 1024-65535 "
                                    "(cx7_link_master_port_<path>)"]),
    # Names and how they relate.
    (changed("path", "sglang"), ["path is 'sglang', expected one of tensorfold, vllm"]),
    (changed("head", ""), ["head is '', expected the head's inventory name",
                           "nodes has spark-head, which is neither the head nor a worker"]),
    (changed("head", "spark-x"), ["head spark-x has no entry in nodes (it has spark-head, spark-worker)",
                                  "nodes has spark-head, which is neither the head nor a worker"]),
    (changed("workers", []), ["workers is empty; path tensorfold needs at least one worker (group spark_workers)",
                              "nodes has spark-worker, which is neither the head nor a worker"]),
    (changed("workers", "spark-worker"), ["workers is 'spark-worker', expected a list of the workers' inventory "
                                          "names", "nodes has spark-worker, which is neither the head nor a worker"]),
    (changed("workers", [WORKER, WORKER]), ["workers lists spark-worker more than once",
                                            "nodes.spark-worker.rank is 1, expected 2 (the head is 0, then the "
                                            "workers in order)"]),
    (changed("workers", [WORKER, HEAD]), ["head spark-head is also listed in workers"]),
    (changed("nodes", None), ["nodes is missing (null), expected an object with an entry for the head and each "
                              "worker"]),
    # One node's entry.
    (changed("nodes.spark-worker.rank", 0), ["nodes.spark-worker.rank is 0, expected 1 (the head is 0, then the "
                                             "workers in order)"]),
    (changed("nodes.spark-worker.role", "head"), ["nodes.spark-worker.role is 'head', expected 'worker'"]),
    (changed("nodes.spark-worker.netdev", ""), ["nodes.spark-worker.netdev is '', expected the link netdev's name "
                                                "(e.g. enp1s0f1np1)"]),
    (changed("nodes.spark-head.env.NCCL_IB_GID_INDEX", 3),
     ["nodes.spark-head.env.NCCL_IB_GID_INDEX is 3, expected a string (NCCL and GLOO read their settings as "
      "strings)"]),
    (changed("nodes.spark-head.env.NCCL_IB_HCA", None),
     ["nodes.spark-head.env.NCCL_IB_HCA is missing (null), expected a string (NCCL and GLOO read their settings as "
      "strings)"]),
    (changed("nodes.spark-head.env", {"NCCL IB HCA": "x"}),
     ["nodes.spark-head.env has the name 'NCCL IB HCA', expected a shell variable name"]),
    (changed("nodes.spark-head.env", None),
     ["nodes.spark-head.env is missing (null), expected an object of NCCL/GLOO settings"]),
    (changed("nodes.spark-head.hcas", "rocep1s0f1"),
     ["nodes.spark-head.hcas is 'rocep1s0f1', expected a list of RDMA device names"]),
    (changed("nodes.spark-head.gid_index", {"rocep1s0f1": "3"}),
     ["nodes.spark-head.gid_index is {'rocep1s0f1': '3'}, expected {device: GID index or null}"]),
    (changed("schema", 2), ["schema 2, expected 1"]),
    ([GOOD], ["the contract is not a JSON object"]),
])
def test_refused_with_what_was_expected_and_found(contract, problems):
    assert validate(contract) == problems


@pytest.mark.parametrize("value, quoted", [
    ("enp1s0f1np1", "enp1s0f1np1"),
    ("", "''"),
    (None, "''"),
    ("spark-worker other", "'spark-worker other'"),
    ("it's", "'it'\"'\"'s'"),
])
def test_cluster_env_values_are_read_back_exactly_by_sh(value, quoted):
    assert shell_quote(value) == quoted
    out = subprocess.run(["sh", "-c", '. /dev/stdin; printf %s "$K"'], input="K=%s\n" % shell_quote(value),
                         capture_output=True, text=True, check=True).stdout
    assert out == ("" if value is None else value)
