"""Parser and join helpers behind ibdev2netdev_facts, on real output shapes."""

import json
import os

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ibdev2netdev import (
    gid_to_ipv4,
    join_ports,
    operstate_to_state,
    parse_ibdev2netdev,
    parse_ip_json,
    parse_port_state,
    read_sysfs_port,
    roce_v2_ipv4_gids,
    walk_sysfs,
)

# A DGX Spark with one QSFP cable in the second cage: all four functions listed,
# only the cabled port's two functions Up (capital P on the second PCIe domain).
SPARK_ONE_CABLE = """rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)
rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)
roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)
roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)
"""


def test_spark_both_functions_with_capital_p():
    ports, unparsed = parse_ibdev2netdev(SPARK_ONE_CABLE)
    assert unparsed == []
    assert [(p["hca"], p["netdev"], p["state"]) for p in ports] == [
        ("rocep1s0f0", "enp1s0f0np0", "Down"),
        ("rocep1s0f1", "enp1s0f1np1", "Up"),
        ("roceP2p1s0f0", "enP2p1s0f0np0", "Down"),
        ("roceP2p1s0f1", "enP2p1s0f1np1", "Up"),
    ]
    assert all(p["port"] == 1 for p in ports)


def test_all_ports_down():
    ports, unparsed = parse_ibdev2netdev("rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)\n")
    assert unparsed == []
    assert ports == [{"hca": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1", "state": "Down"}]


def test_mlx5_style_lines_and_several_hcas():
    text = (
        "mlx5_0 port 1 ==> ib0 (Up)\n"
        "mlx5_1 port 1 ==> ib1 (Down)\n"
        "mlx5_2 port 1 ==> ens1f0 (Up)\n"
        "mlx5_bond_0 port 1 ==> bond0 (Up)\n"
        "mlx4_0 port 2 ==> ib1 (Up)\n"
    )
    ports, unparsed = parse_ibdev2netdev(text)
    assert unparsed == []
    assert [(p["hca"], p["port"], p["netdev"]) for p in ports] == [
        ("mlx5_0", 1, "ib0"),
        ("mlx5_1", 1, "ib1"),
        ("mlx5_2", 1, "ens1f0"),
        ("mlx5_bond_0", 1, "bond0"),
        ("mlx4_0", 2, "ib1"),
    ]


def test_trailing_spaces_tabs_and_crlf():
    text = "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)   \r\n\troceP2p1s0f1  port 1  ==>  enP2p1s0f1np1  (Up) \n"
    ports, unparsed = parse_ibdev2netdev(text)
    assert unparsed == []
    assert [(p["hca"], p["netdev"], p["state"]) for p in ports] == [
        ("rocep1s0f1", "enp1s0f1np1", "Up"),
        ("roceP2p1s0f1", "enP2p1s0f1np1", "Up"),
    ]


def test_verbose_form():
    text = (
        "0000:01:00.1 rocep1s0f1 (MT4129 - NV0000000001) NVIDIA ConnectX-7 fw 28.45.1020 "
        "port 1 (ACTIVE) ==> enp1s0f1np1 (Up)\n"
        "0002:01:00.1 roceP2p1s0f1 (MT4129 - NV0000000001) NVIDIA ConnectX-7 fw 28.45.1020 "
        "port 1 (DOWN  ) ==> enP2p1s0f1np1 (Down)\n"
    )
    ports, unparsed = parse_ibdev2netdev(text)
    assert unparsed == []
    assert [(p["hca"], p["port"], p["netdev"], p["state"]) for p in ports] == [
        ("rocep1s0f1", 1, "enp1s0f1np1", "Up"),
        ("roceP2p1s0f1", 1, "enP2p1s0f1np1", "Down"),
    ]


@pytest.mark.parametrize("text", ["", "\n", "   \n\n", None])
def test_empty_output(text):
    assert parse_ibdev2netdev(text) == ([], [])


def test_garbage_lines_are_reported_not_dropped():
    ports, unparsed = parse_ibdev2netdev("ibdev2netdev: no RDMA devices\nrocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n")
    assert [p["hca"] for p in ports] == ["rocep1s0f1"]
    assert unparsed == ["ibdev2netdev: no RDMA devices"]


@pytest.mark.parametrize(
    "text, expected",
    [("4: ACTIVE\n", "ACTIVE"), ("1: DOWN", "DOWN"), ("5: LinkUp", "LinkUp"), ("ACTIVE", "ACTIVE"),
     ("", None), ("  \n", None), (None, None)],
)
def test_parse_port_state(text, expected):
    assert parse_port_state(text) == expected


@pytest.mark.parametrize(
    "gid, expected",
    [
        ("0000:0000:0000:0000:0000:ffff:c612:010a", "198.18.1.10"),
        ("0000:0000:0000:0000:0000:FFFF:C612:020B\n", "198.18.2.11"),
        ("fe80:0000:0000:0000:b8ce:f6ff:fe12:3456", None),
        ("0000:0000:0000:0000:0000:0000:0000:0000", None),
        ("0000:0000:0000:0000:0000:ffff:c612", None),
        ("zzzz:0000:0000:0000:0000:ffff:c612:010a", None),
        ("", None),
        (None, None),
    ],
)
def test_gid_to_ipv4(gid, expected):
    assert gid_to_ipv4(gid) == expected


def test_roce_v2_lowest_index_wins_and_v1_is_ignored():
    gids = [
        {"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "IB/RoCE v1"},
        {"index": 1, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "RoCE v2"},
        {"index": 5, "gid": "0000:0000:0000:0000:0000:ffff:c612:010a", "type": "RoCE v2"},
        {"index": 2, "gid": "0000:0000:0000:0000:0000:ffff:c612:010a", "type": "IB/RoCE v1"},
        {"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:c612:010a", "type": "RoCE v2\n"},
        {"index": 4, "gid": "0000:0000:0000:0000:0000:ffff:c612:020a", "type": None},
    ]
    assert roce_v2_ipv4_gids(gids) == {"198.18.1.10": 3}


def test_parse_ip_json_joins_addr_and_link():
    link = json.dumps([{"ifname": "enp1s0f1np1", "mtu": 9000, "operstate": "UP", "flags": ["UP"]}])
    addr = json.dumps([
        {"ifname": "enp1s0f1np1", "mtu": 9000, "operstate": "UP", "addr_info": [
            {"family": "inet", "local": "198.18.1.10", "prefixlen": 24},
            {"family": "inet6", "local": "fe80::1", "prefixlen": 64},
            {"family": "inet", "local": "198.18.9.10", "prefixlen": 24},
        ]},
        {"ifname": "lo", "mtu": 65536, "operstate": "UNKNOWN", "addr_info": []},
    ])
    info = parse_ip_json(addr_text=addr, link_text=link)
    assert info["enp1s0f1np1"] == {
        "operstate": "UP", "mtu": 9000, "flags": ["UP"], "ipv4": ["198.18.1.10/24", "198.18.9.10/24"],
    }
    assert info["lo"]["ipv4"] == []
    assert parse_ip_json(link_text=link)["enp1s0f1np1"]["ipv4"] == []
    assert parse_ip_json("", "  ") == {}


@pytest.mark.parametrize(
    "operstate, expected", [("UP", "Up"), ("up", "Up"), ("DOWN", "Down"), ("UNKNOWN", "Down"), (None, None)])
def test_operstate_to_state(operstate, expected):
    assert operstate_to_state(operstate) == expected


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def make_port(root, hca, ipv4_hex, state="4: ACTIVE", ndev=None, device_net=None):
    """A sysfs port like the kernel exposes it: link-local GIDs at 0/1, IPv4-mapped at 2/3."""
    base = os.path.join(root, "class", "infiniband", hca, "ports", "1")
    _write(os.path.join(base, "state"), state + "\n")
    _write(os.path.join(base, "phys_state"), "5: LinkUp\n")
    _write(os.path.join(base, "link_layer"), "Ethernet\n")
    entries = [
        ("fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:%s" % ipv4_hex, "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:%s" % ipv4_hex, "RoCE v2"),
    ]
    for index, (gid, kind) in enumerate(entries):
        _write(os.path.join(base, "gids", str(index)), gid + "\n")
        _write(os.path.join(base, "gid_attrs", "types", str(index)), kind + "\n")
        if ndev:
            _write(os.path.join(base, "gid_attrs", "ndevs", str(index)), ndev + "\n")
    # An unpopulated slot: the kernel lists it but the type cannot be read.
    _write(os.path.join(base, "gids", "4"), "0000:0000:0000:0000:0000:0000:0000:0000\n")
    for name, dev_port in (device_net or {}).items():
        _write(os.path.join(root, "class", "infiniband", hca, "device", "net", name, "dev_port"), "%d\n" % dev_port)


def test_read_sysfs_port_and_walk(tmp_path):
    root = str(tmp_path)
    make_port(root, "rocep1s0f1", "c612:010a", ndev="enp1s0f1np1")
    make_port(root, "roceP2p1s0f1", "c612:020a", state="1: DOWN", device_net={"enP2p1s0f1np1": 0})
    make_port(root, "mlx5_9", "c612:030a", device_net={"ens9f0": 0, "ens9f1": 1})
    info = read_sysfs_port(root, "rocep1s0f1", 1)
    assert info["state"] == "ACTIVE"
    assert info["phys_state"] == "LinkUp"
    assert info["link_layer"] == "Ethernet"
    assert roce_v2_ipv4_gids(info["gids"]) == {"198.18.1.10": 3}
    assert read_sysfs_port(root, "roceP2p1s0f1", 1)["state"] == "DOWN"
    missing = read_sysfs_port(root, "nope", 1)
    assert missing["exists"] is False and missing["state"] is None and missing["gids"] == []
    assert walk_sysfs(root) == [
        {"hca": "mlx5_9", "port": 1, "netdev": "ens9f0"},
        {"hca": "roceP2p1s0f1", "port": 1, "netdev": "enP2p1s0f1np1"},
        {"hca": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1"},
    ]
    assert walk_sysfs(str(tmp_path / "absent")) == []


def test_join_ports_resolves_gid_for_the_netdev_address(tmp_path):
    root = str(tmp_path)
    make_port(root, "rocep1s0f1", "c612:010a")
    make_port(root, "roceP2p1s0f1", "c612:020a")
    ports = parse_ibdev2netdev(SPARK_ONE_CABLE)[0]
    ip_info = {
        "enp1s0f1np1": {"operstate": "UP", "mtu": 9000, "flags": [], "ipv4": ["198.18.1.10/24"]},
        # Address moved to another subnet: the GID table still has the old one.
        "enP2p1s0f1np1": {"operstate": "UP", "mtu": 9000, "flags": [], "ipv4": ["10.9.9.9/24"]},
    }
    sysfs = {(p["hca"], p["port"]): read_sysfs_port(root, p["hca"], p["port"]) for p in ports}
    joined = {p["hca"]: p for p in join_ports(ports, ip_info, sysfs)}
    first = joined["rocep1s0f1"]
    assert first["netdev"] == "enp1s0f1np1" and first["state"] == "Up"
    assert first["sysfs_state"] == "ACTIVE" and first["mtu"] == 9000 and first["operstate"] == "UP"
    assert first["ipv4"] == ["198.18.1.10/24"]
    assert first["gid_index"] == 3 and first["gid_index_by_ipv4"] == {"198.18.1.10": 3}
    second = joined["roceP2p1s0f1"]
    assert second["gid_index"] is None
    assert second["roce_v2_ipv4_gids"] == [{"ipv4": "198.18.2.10", "index": 3}]
    # Ports whose netdev does not exist and whose HCA has no sysfs entry.
    absent = joined["rocep1s0f0"]
    assert absent["operstate"] is None and absent["mtu"] is None and absent["ipv4"] == []
    assert absent["sysfs_state"] is None and absent["gid_index"] is None and absent["state"] == "Down"


def test_join_ports_derives_state_from_operstate_without_tool():
    ports = [{"hca": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1", "state": None}]
    ip_info = {"enp1s0f1np1": {"operstate": "DOWN", "mtu": 1500, "flags": [], "ipv4": []}}
    assert join_ports(ports, ip_info, {})[0]["state"] == "Down"
