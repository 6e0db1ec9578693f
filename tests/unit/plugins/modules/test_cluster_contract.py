"""cluster_contract through real ansible on localhost: written once and then unchanged,
read back as the glm53_cluster fact, sourceable by a shell, and a missing contract
reads as a clear message (no traceback)."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import file_digests, wanted_digests
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
CONTRACT = {
    "schema": 1, "path": "tensorfold", "head": "spark-head", "workers": ["spark-worker"],
    "master_address": "198.18.1.10", "master_port": 29551, "ssh_user": "spark", "links": [],
    "nodes": {
        "spark-head": {"rank": 0, "role": "head", "link_address": "198.18.1.10", "netdev": "enp1s0f1np1",
                       "env": {"NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}},
        "spark-worker": {"rank": 1, "role": "worker", "link_address": "198.18.1.11", "netdev": "enp1s0f1np1",
                         "env": {"NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}},
    },
}


def ansible(args, check=False, human=False):
    """`ansible localhost -m dgx_spark.glm53.cluster_contract -a ARGS`: the result through the
    JSON callback, or (``human``) the text an operator reads."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if not human:
        env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
           "-m", "dgx_spark.glm53.cluster_contract", "-a", json.dumps(args)] + (["--check"] if check else [])
    proc = ansiballz.run(cmd, cwd=ROOT, env=env, timeout=120)
    if human:
        return proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    return data["plays"][0]["tasks"][0]["hosts"]["localhost"], proc


@pytest.fixture
def config_dir(tmp_path):
    return str(tmp_path / "cfg")


def test_written_once_then_unchanged_and_read_back(config_dir):
    present = {"state": "present", "contract": CONTRACT, "node": "spark-worker", "config_dir": config_dir}
    dry, _proc = ansible(present, check=True)
    assert dry["changed"] is True and not os.path.exists(os.path.join(config_dir, "cluster.json"))
    first, _proc = ansible(present)
    assert first["changed"] is True
    second, _proc = ansible(present)
    assert second["changed"] is False
    # What the preflight's gather reads back is what the controller expects of this contract,
    # so a converged preflight skips the write (the bytes went through the module's JSON).
    assert file_digests(config_dir) == wanted_digests(CONTRACT, "spark-worker")
    assert file_digests(config_dir + "-none") == {"cluster.json": None, "cluster.env": None}
    with open(os.path.join(config_dir, "cluster.json")) as handle:
        assert json.load(handle) == CONTRACT
    read, _proc = ansible({"state": "read", "config_dir": config_dir})
    assert read["ansible_facts"]["glm53_cluster"] == CONTRACT


def test_env_file_is_sourceable(config_dir):
    ansible({"state": "present", "contract": CONTRACT, "node": "spark-worker", "config_dir": config_dir})
    env = os.path.join(config_dir, "cluster.env")
    out = subprocess.run(["bash", "-c", '. "$1" && echo "$GLM53_RANK|$GLM53_MASTER_ADDR:$GLM53_MASTER_PORT|'
                                        '$GLM53_WORKERS|$NCCL_IB_HCA|$GLM53_NODE_COUNT"', "-", env],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "1|198.18.1.10:29551|spark-worker|rocep1s0f1,roceP2p1s0f1|2"


def test_a_missing_contract_says_to_run_the_preflight(config_dir):
    result, _proc = ansible({"state": "read", "config_dir": config_dir})
    assert result["failed"] is True
    assert result["msg"] == ("no cluster contract at %s/cluster.json on this node; run the preflight first "
                             "(ansible-playbook playbooks/preflight.yml -e path=..., or playbooks/site.yml)" % config_dir)
    # What the operator reads: the message alone, no "An exception occurred ... (traceback unavailable)".
    text = ansible({"state": "read", "config_dir": config_dir}, human=True)
    assert "no cluster contract at" in text
    assert "exception" not in text.lower() and "traceback" not in text.lower(), text


def test_a_corrupt_contract_is_refused_with_the_fix(config_dir):
    os.makedirs(config_dir)
    with open(os.path.join(config_dir, "cluster.json"), "w") as handle:
        handle.write("{not json")
    result, _proc = ansible({"state": "read", "config_dir": config_dir})
    assert result["failed"] is True and "is unusable (not JSON" in result["msg"] and "run the preflight" in result["msg"]
    text = ansible({"state": "read", "config_dir": config_dir}, human=True)
    assert "is unusable (not JSON" in text and "exception" not in text.lower(), text


def test_refuses_to_write_a_contract_without_this_node(config_dir):
    result, _proc = ansible({"state": "present", "contract": CONTRACT, "node": "spark-worker-9", "config_dir": config_dir})
    assert result["failed"] is True and "node spark-worker-9 is not in the contract's nodes" in result["msg"]
    assert not os.path.exists(config_dir)


def _with(path, value):
    contract = json.loads(json.dumps(CONTRACT))
    keys = path.split(".")
    target = contract
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return contract


@pytest.mark.parametrize("contract, problem", [
    (_with("ssh_user", ""), "ssh_user is empty, expected the user the head logs in to the workers as "
                            "(cx7_link_ssh_user, by default the workers' ansible_user): set ansible_user for the "
                            "workers and rerun the preflight"),
    (_with("nodes.spark-worker.link_address", "fe80::1%enp1s0f1np1"),
     "nodes.spark-worker.link_address is 'fe80::1%enp1s0f1np1', an IPv6 link-local address with a zone (enp1s0f1np1), "
     "which the engines, NCCL's RoCE GID choice and ssh cannot use here; expected an IPv4 address: put an IPv4 "
     "address on the CX7 link netdev (glm53_link_address, e.g. 192.168.100.10 with its prefix; cx7_link_configure: "
     "true writes it with netplan) and rerun the preflight"),
])
def test_refuses_to_write_a_contract_later_roles_cannot_use(config_dir, contract, problem):
    result, _proc = ansible({"state": "present", "contract": contract, "node": "spark-worker", "config_dir": config_dir})
    assert result["failed"] is True
    assert result["msg"] == "cluster_contract: refusing to write an unusable contract: %s" % problem
    assert not os.path.exists(config_dir)


def test_a_kept_contract_with_a_null_address_is_refused_when_read(config_dir):
    # What the roles would have turned into spark@None (hf_weights mirror, the kit's WORKER_SSH).
    os.makedirs(config_dir)
    with open(os.path.join(config_dir, "cluster.json"), "w") as handle:
        json.dump(_with("nodes.spark-worker.link_address", None), handle)
    result, _proc = ansible({"state": "read", "config_dir": config_dir})
    assert result["failed"] is True
    assert result["msg"] == (
        "the cluster contract at %s/cluster.json is unusable (nodes.spark-worker.link_address is missing (null), "
        "expected the node's IPv4 address on the CX7 link); run the preflight first (ansible-playbook "
        "playbooks/preflight.yml -e path=..., or playbooks/site.yml)" % config_dir)
    assert "glm53_cluster" not in result.get("ansible_facts", {})
