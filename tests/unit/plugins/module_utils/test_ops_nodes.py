"""A node's part of the operations program (_ops_nodes): the command the head sends a worker over
ssh and how its answer is read, and node_facts (links, GID index and tables, disk) from a fake
sysfs tree."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _ops_nodes as on

COLLECTIONS = str(Path(__file__).resolve().parents[4] / ".collections")
ZERO = on.ZERO_GID
LINK_LOCAL = "fe80:0000:0000:0000:0ec3:e8ff:fe00:0001"
WORKER_1 = "0000:0000:0000:0000:0000:ffff:c612:010b"  # ::ffff:198.18.1.11
WORKER_2 = "0000:0000:0000:0000:0000:ffff:c612:020b"  # ::ffff:198.18.2.11


# -- remote_command -----------------------------------------------------------------------------


def test_remote_command_keeps_a_leading_home_unquoted():
    assert on.remote_command("~/.local/bin/glm53-ops", "node-facts", {"gids": []}) == (
        "~/.local/bin/glm53-ops node-facts '{\"gids\": []}'")


def test_remote_command_quotes_the_rest_and_the_json():
    command = on.remote_command("~/my bin/glm53-ops", "evict", {"paths": ["/models/it's"], "a": 1})
    assert command.startswith("~/'my bin/glm53-ops' evict ")
    assert on.remote_command("/opt/glm 53/ops", "evict", {}) == "'/opt/glm 53/ops' evict '{}'"


def test_remote_command_reads_back_through_a_real_shell(tmp_path):
    query = {"paths": ["/models/it's here", "$HOME", "`x`"], "gate_gib": 1.5, "b": None}
    command = on.remote_command("~/my bin/glm53-ops", "evict", query)
    # The shell the worker's sshd runs: the program word expands ~, the JSON stays one word.
    shown = subprocess.run(["sh", "-c", "printf '%s\\n' " + command], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                           stdout=subprocess.PIPE, check=True, universal_newlines=True).stdout.splitlines()
    assert shown == [str(tmp_path / "my bin" / "glm53-ops"), "evict", json.dumps(query, sort_keys=True)]
    assert json.loads(shown[2]) == query


# -- parse_answer --------------------------------------------------------------------------------


def test_parse_answer_an_ssh_error():
    assert on.parse_answer({"error": "ssh: connect timed out", "rc": None, "stdout": ""}) == (
        None, "ssh: connect timed out")


def test_parse_answer_a_non_zero_exit_names_rc_and_output():
    value, error = on.parse_answer({"rc": 2, "stdout": "partial\n", "stderr": "Traceback\n  boom\n"})
    assert value is None
    assert error == "exit 2: Traceback boom partial"


def test_parse_answer_keeps_the_last_300_characters_of_a_long_failure():
    value, error = on.parse_answer({"rc": 1, "stdout": "", "stderr": "x" * 1000 + " the end"})
    assert error.startswith("exit 1: ")
    assert error.endswith("the end")
    assert len(error) == len("exit 1: ") + 300


def test_parse_answer_an_empty_answer_is_an_error():
    assert on.parse_answer({"rc": 0, "stdout": "  \n", "stderr": ""})[0] is None
    assert on.parse_answer({"rc": 0, "stdout": "  \n", "stderr": ""})[1].startswith("exit 0")


def test_parse_answer_the_last_line_is_json():
    run = {"rc": 0, "stdout": "a login banner\n{\"not\": \"this\"}\n{\"memory\": {\"mem_free\": 1}}\n", "stderr": ""}
    assert on.parse_answer(run) == ({"memory": {"mem_free": 1}}, None)


def test_parse_answer_a_last_line_that_is_not_json():
    assert on.parse_answer({"rc": 0, "stdout": "{\"a\": 1}\nbye\n"}) == (None, "not JSON: bye")


# -- node_facts from a fake sysfs ------------------------------------------------------------------


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def gid_port(root, hca, entries):
    """``entries``: [(index, gid, type or None, ndev or None)] under class/infiniband/<hca>/ports/1."""
    base = root / "class" / "infiniband" / hca / "ports" / "1"
    for index, gid, kind, ndev in entries:
        write(base / "gids" / str(index), gid + "\n")
        if kind is not None:
            write(base / "gid_attrs" / "types" / str(index), kind + "\n")
        if ndev is not None:
            write(base / "gid_attrs" / "ndevs" / str(index), ndev + "\n")


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    write(root / "class" / "net" / "enp1s0f1np1" / "operstate", "up\n")
    write(root / "class" / "net" / "enp1s0f1np1" / "carrier", "1\n")
    # Admin-down: no readable carrier.
    write(root / "class" / "net" / "enP2p1s0f1np1" / "operstate", "down\n")
    gid_port(root, "rocep1s0f1", [
        (0, LINK_LOCAL, "IB/RoCE v1", "enp1s0f1np1"),
        (1, LINK_LOCAL, "RoCE v2", "enp1s0f1np1"),
        (2, WORKER_1, "RoCE v2", "enp1s0f1np1.100"),  # a VLAN on the port: not the link's
        (3, WORKER_1, "IB/RoCE v1", "enp1s0f1np1"),
        (4, WORKER_1, "RoCE v2", "enp1s0f1np1"),
        (5, ZERO, None, None),
        (6, ZERO, "RoCE v2", None),
    ])
    gid_port(root, "roceP2p1s0f1", [
        (0, LINK_LOCAL, "IB/RoCE v1", "enP2p1s0f1np1"),
        (1, WORKER_2, "IB/RoCE v1", "enP2p1s0f1np1"),
        (3, WORKER_2, "RoCE v2", "enP2p1s0f1np1"),
    ])
    monkeypatch.setattr(on, "SYSFS", str(root))
    return root


GIDS = [{"hca": "rocep1s0f1", "netdev": "enp1s0f1np1", "ipv4": "198.18.1.11"},
        {"hca": "roceP2p1s0f1", "netdev": "enP2p1s0f1np1", "ipv4": "198.18.2.11"}]


def test_node_facts_links(sysfs):
    facts = on.node_facts({"netdevs": ["enp1s0f1np1", "enP2p1s0f1np1", "absent0"]})
    assert facts["links"] == {
        "enp1s0f1np1": {"operstate": "up", "carrier": "1"},
        "enP2p1s0f1np1": {"operstate": "down", "carrier": None},
        "absent0": {"operstate": None, "carrier": None},
    }


def test_node_facts_gid_index_is_the_roce_v2_entry_of_the_address_on_the_netdev(sysfs):
    facts = on.node_facts({"gids": GIDS})
    assert facts["gid_index"] == {"rocep1s0f1": 4, "roceP2p1s0f1": 3}
    assert facts["gid_tables"] == {}  # only when asked


def test_node_facts_gid_index_none_when_no_entry_carries_the_address(sysfs):
    facts = on.node_facts({"gids": [{"hca": "rocep1s0f1", "netdev": "enp1s0f1np1", "ipv4": "198.18.1.99"},
                                    {"hca": "absent_hca", "netdev": "x", "ipv4": "198.18.1.11"}]})
    assert facts["gid_index"] == {"rocep1s0f1": None, "absent_hca": None}


def test_node_facts_gid_tables_skip_zero_gids(sysfs):
    facts = on.node_facts({"gids": GIDS[:1], "gid_tables": True})
    table = facts["gid_tables"]["rocep1s0f1"]
    assert [entry["index"] for entry in table] == [0, 1, 2, 3, 4]
    assert table[4] == {"index": 4, "gid": WORKER_1, "type": "RoCE v2", "ndev": "enp1s0f1np1"}
    assert all(entry["gid"] != ZERO for entry in table)


def test_node_facts_memory_is_always_there(sysfs):
    facts = on.node_facts({})
    assert facts["memory"]["mem_total"] > 0
    assert set(facts["memory"]) >= {"mem_total", "mem_free", "mem_available"}
    assert facts["disk"] == [] and facts["links"] == {} and facts["gid_index"] == {}


def test_sysfs_root_is_read_from_the_environment_at_import(tmp_path):
    code = ("from ansible_collections.dgx_spark.glm53.plugins.module_utils import _ops_nodes; "
            "print(_ops_nodes.SYSFS)")
    env = dict(os.environ, GLM53_SYSFS_ROOT=str(tmp_path), PYTHONPATH=COLLECTIONS)
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, check=True,
                         universal_newlines=True).stdout.strip()
    assert out == str(tmp_path)


# -- disk ------------------------------------------------------------------------------------------


def test_disk_free_walks_up_to_an_existing_parent(tmp_path):
    got = on.disk_free(str(tmp_path / "not" / "made" / "yet"))
    assert got["path"] == str(tmp_path)
    stat = os.statvfs(str(tmp_path))
    assert got["size"] == stat.f_blocks * stat.f_frsize
    assert 0 < got["free"] <= got["size"]


def test_disk_free_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert on.disk_free("~")["path"] == str(tmp_path)
    assert on.disk_free("~/.cache/glm53-vllm")["path"] == str(tmp_path)


def test_node_facts_disk_paths(tmp_path, monkeypatch, sysfs):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "data").mkdir()
    facts = on.node_facts({"disk_paths": ["~", str(tmp_path / "data" / "later")]})
    assert [d["path"] for d in facts["disk"]] == [str(tmp_path), str(tmp_path / "data")]
    assert all(d["free"] > 0 for d in facts["disk"])
