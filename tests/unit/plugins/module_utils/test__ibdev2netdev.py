"""Parser and join helpers behind ibdev2netdev_facts, on real output shapes."""

import ctypes
import errno
import json
import os
import time

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import processes
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ibdev2netdev import (
    CommandTimeout,
    gather_ports,
    gid_index_for,
    gid_to_ipv4,
    join_ports,
    link_state,
    parse_ibdev2netdev,
    parse_ip_addr_json,
    parse_port_state,
    read_sysfs_port,
    roce_v2_ipv4_gids,
    run_command,
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


def test_na_and_empty_states_are_reported_as_printed():
    # The script prints (NA) when the netdev has no carrier file; nothing is guessed from it.
    ports, unparsed = parse_ibdev2netdev("rocep1s0f1 port 1 ==> enp1s0f1np1 (NA)\nmlx5_3 port 1 ==> eth3 ()\n")
    assert unparsed == []
    assert [(p["hca"], p["state"]) for p in ports] == [("rocep1s0f1", "NA"), ("mlx5_3", "")]


def test_verbose_lines_are_not_guessed_at():
    # The module runs the plain form only; anything else is surfaced, not half-parsed.
    line = "0000:01:00.1 rocep1s0f1 (MT4129 - NV1) fw 28.45.1020 port 1 (ACTIVE) ==> enp1s0f1np1 (Up)"
    assert parse_ibdev2netdev(line) == ([], [line])


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


def test_roce_v2_table_lists_every_ipv4_entry_and_ignores_v1():
    gids = [
        {"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "IB/RoCE v1", "ndev": "eth1"},
        {"index": 1, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "RoCE v2", "ndev": "eth1"},
        {"index": 5, "gid": "0000:0000:0000:0000:0000:ffff:c612:010a", "type": "RoCE v2", "ndev": "eth1.7"},
        {"index": 2, "gid": "0000:0000:0000:0000:0000:ffff:c612:010a", "type": "IB/RoCE v1", "ndev": "eth1"},
        {"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:c612:010a", "type": "RoCE v2\n", "ndev": "eth1"},
        {"index": 4, "gid": "0000:0000:0000:0000:0000:ffff:c612:020a", "type": None, "ndev": None},
        {"index": 7, "gid": "0000:0000:0000:0000:0000:ffff:a9fe:233e", "type": "RoCE v2", "ndev": None},
    ]
    table = roce_v2_ipv4_gids(gids)
    assert table == [
        {"ipv4": "198.18.1.10", "index": 3, "ndev": "eth1"},
        {"ipv4": "198.18.1.10", "index": 5, "ndev": "eth1.7"},
        {"ipv4": "169.254.35.62", "index": 7, "ndev": None},
    ]
    assert gid_index_for(table, "198.18.1.10", "eth1") == 3
    # Index 3 belongs to eth1: on the VLAN only its own entry counts.
    assert gid_index_for(table, "198.18.1.10", "eth1.7") == 5
    # An unreadable ndev does not exclude the entry.
    assert gid_index_for(table, "169.254.35.62", "eth1") == 7
    assert gid_index_for(table, "198.18.2.10", "eth1") is None


def test_parse_ip_addr_json():
    addr = json.dumps([
        {"ifname": "enp1s0f1np1", "mtu": 9000, "operstate": "UP", "addr_info": [
            {"family": "inet", "local": "169.254.35.62", "prefixlen": 16},
            {"family": "inet6", "local": "fe80::1", "prefixlen": 64},
            {"family": "inet", "local": "198.18.1.10", "prefixlen": 24},
        ]},
        {"ifname": "lo", "mtu": 65536, "operstate": "UNKNOWN", "addr_info": []},
    ])
    info = parse_ip_addr_json(addr)
    assert info["enp1s0f1np1"] == {"operstate": "UP", "mtu": 9000, "ipv4": ["169.254.35.62/16", "198.18.1.10/24"]}
    assert info["lo"]["ipv4"] == []
    assert parse_ip_addr_json("  ") == {}


@pytest.mark.parametrize("text", ["1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536", '{"ifname": "lo"}'])
def test_parse_ip_addr_json_rejects_what_is_not_the_list(text):
    with pytest.raises(ValueError):
        parse_ip_addr_json(text)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@pytest.mark.parametrize("carrier, expected", [("1\n", "Up"), ("0\n", "Down"), ("", "Down"), ("2\n", "Down")])
def test_link_state_reads_carrier_like_the_script(tmp_path, carrier, expected):
    _write(str(tmp_path / "class" / "net" / "enp1s0f1np1" / "carrier"), carrier)
    assert link_state(str(tmp_path), "rocep1s0f1", "enp1s0f1np1") == expected


def test_link_state_is_na_without_a_carrier_file_or_netdev(tmp_path):
    os.makedirs(str(tmp_path / "class" / "net" / "enp1s0f1np1"))
    assert link_state(str(tmp_path), "rocep1s0f1", "enp1s0f1np1") == "NA"
    assert link_state(str(tmp_path), "rocep1s0f1", "nosuchdev0") == "NA"


def test_link_state_finds_the_netdev_through_the_hca(tmp_path):
    # A test tree that links device/net/<netdev> to the real netdev, as the kernel does.
    net = tmp_path / "class" / "infiniband" / "rocelo" / "device" / "net"
    os.makedirs(str(net))
    os.symlink("/sys/class/net/lo", str(net / "lo"))
    assert link_state(str(tmp_path), "rocelo", "lo") == "Up"


CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_REC, MS_PRIVATE = 0x4000, 0x40000


def in_a_new_network_namespace(func):
    """``func()`` run in a forked child with a network namespace of its own and a /sys that shows it.

    A new namespace has only ``lo``, and it is administratively down: a real admin-down netdev
    on any machine, without touching this one's interfaces. Without root the child first makes
    a user namespace, in which it may (Linux lets the owner of a network namespace mount sysfs).
    """
    flags = CLONE_NEWNS | CLONE_NEWNET | (0 if os.geteuid() == 0 else CLONE_NEWUSER)

    def enter_namespaces():
        libc = ctypes.CDLL(None, use_errno=True)
        for call, args in (("unshare", (flags,)),
                           ("mount", (b"none", b"/", None, MS_REC | MS_PRIVATE, None)),  # keep our mounts to us
                           ("mount", (b"sysfs", b"/sys", b"sysfs", 0, None))):
            if getattr(libc, call)(*args) != 0:
                raise OSError(ctypes.get_errno(), "%s: %s" % (call, os.strerror(ctypes.get_errno())))

    return processes.in_child(func, setup=enter_namespaces)


def _carrier_error(name):
    try:
        with open("/sys/class/net/%s/carrier" % name) as handle:
            return handle.read().strip()
    except OSError as exc:
        return errno.errorcode.get(exc.errno)


def test_link_state_of_a_real_admin_down_netdev_is_down():
    # What the kernel says of that lo (EINVAL: admin-down), then what link_state makes of it.
    carrier, state = in_a_new_network_namespace(lambda: (_carrier_error("lo"), link_state("/sys", "anyhca", "lo")))
    assert (carrier, state) == ("EINVAL", "Down")


def test_link_state_of_real_lo_is_up():
    assert link_state("/sys", "anyhca", "lo") == "Up"


def make_port(root, hca, ipv4_hexes, state="4: ACTIVE", ndev=None, device_net=None):
    """A sysfs port as mlx5 fills it: link-local GIDs at 0/1, then a v1/v2 pair per IPv4."""
    base = os.path.join(root, "class", "infiniband", hca, "ports", "1")
    _write(os.path.join(base, "state"), state + "\n")
    _write(os.path.join(base, "phys_state"), "5: LinkUp\n")
    _write(os.path.join(base, "link_layer"), "Ethernet\n")
    entries = [("fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1"),
               ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2")]
    for ipv4_hex in ipv4_hexes:
        entries += [("0000:0000:0000:0000:0000:ffff:%s" % ipv4_hex, "IB/RoCE v1"),
                    ("0000:0000:0000:0000:0000:ffff:%s" % ipv4_hex, "RoCE v2")]
    for index, (gid, kind) in enumerate(entries):
        _write(os.path.join(base, "gids", str(index)), gid + "\n")
        _write(os.path.join(base, "gid_attrs", "types", str(index)), kind + "\n")
        if ndev:
            _write(os.path.join(base, "gid_attrs", "ndevs", str(index)), ndev + "\n")
    # An unpopulated slot: the kernel lists it but the type cannot be read.
    _write(os.path.join(base, "gids", str(len(entries))), "0000:0000:0000:0000:0000:0000:0000:0000\n")
    for name, dev_port in (device_net or {}).items():
        _write(os.path.join(root, "class", "infiniband", hca, "device", "net", name, "dev_port"), "%d\n" % dev_port)


def test_read_sysfs_port_and_walk(tmp_path):
    root = str(tmp_path)
    make_port(root, "rocep1s0f1", ["c612:010a"], ndev="enp1s0f1np1")
    make_port(root, "roceP2p1s0f1", ["c612:020a"], state="1: DOWN", device_net={"enP2p1s0f1np1": 0})
    make_port(root, "mlx5_9", ["c612:030a"], device_net={"ens9f0": 0, "ens9f1": 1})
    _write(os.path.join(root, "class", "net", "enp1s0f1np1", "carrier"), "1\n")
    _write(os.path.join(root, "class", "net", "ens9f0", "carrier"), "0\n")
    info = read_sysfs_port(root, "rocep1s0f1", 1)
    assert (info["state"], info["phys_state"], info["link_layer"]) == ("ACTIVE", "LinkUp", "Ethernet")
    assert roce_v2_ipv4_gids(info["gids"]) == [{"ipv4": "198.18.1.10", "index": 3, "ndev": "enp1s0f1np1"}]
    assert read_sysfs_port(root, "roceP2p1s0f1", 1)["state"] == "DOWN"
    missing = read_sysfs_port(root, "nope", 1)
    assert missing["state"] is None and missing["gids"] == []
    assert walk_sysfs(root) == [
        {"hca": "mlx5_9", "port": 1, "netdev": "ens9f0", "state": "Down"},
        # device/net holds the netdev's dev_port but no carrier: the script would print (NA).
        {"hca": "roceP2p1s0f1", "port": 1, "netdev": "enP2p1s0f1np1", "state": "NA"},
        {"hca": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1", "state": "Up"},
    ]
    assert walk_sysfs(str(tmp_path / "absent")) == []


def _join(root, ipv4_by_netdev, address=None, text="rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n"):
    ports = parse_ibdev2netdev(text)[0]
    ip_info = dict((netdev, {"operstate": "UP", "mtu": 9000, "ipv4": ipv4})
                   for netdev, ipv4 in ipv4_by_netdev.items())
    sysfs = dict(((p["hca"], p["port"]), read_sysfs_port(root, p["hca"], p["port"])) for p in ports)
    return dict((p["hca"], p) for p in join_ports(ports, ip_info, sysfs, address=address))


# NVIDIA's older two-Spark netplan (link-local: [ipv4]) gives each CX7 netdev a 169.254/16 address;
# a static one added later sits beside it, after it in the kernel's order and in the GID table.
LINK_LOCAL_HEAD = "a9fe:233e"  # 169.254.35.62
LINK_LOCAL_WORKER = "a9fe:233f"  # 169.254.35.63
STATIC_HEAD = "c612:010a"  # 198.18.1.10


def test_head_with_link_local_first_uses_the_configured_address(tmp_path):
    root = str(tmp_path)
    make_port(root, "rocep1s0f1", [LINK_LOCAL_HEAD, STATIC_HEAD], ndev="enp1s0f1np1")
    ipv4 = {"enp1s0f1np1": ["169.254.35.62/16", "198.18.1.10/24"]}
    port = _join(root, ipv4, address="198.18.1.10")["rocep1s0f1"]
    assert (port["gid_index"], port["gid_ipv4"]) == (5, "198.18.1.10")
    assert port["gid_index_by_ipv4"] == {"169.254.35.62": 3, "198.18.1.10": 5}
    assert port["roce_v2_ipv4_gids"] == [
        {"ipv4": "169.254.35.62", "index": 3, "ndev": "enp1s0f1np1"},
        {"ipv4": "198.18.1.10", "index": 5, "ndev": "enp1s0f1np1"},
    ]
    # Without the address the first IPv4 wins, and that is the link-local one.
    assert _join(root, ipv4)["rocep1s0f1"]["gid_index"] == 3


def test_configured_address_without_a_roce_v2_gid_gives_none(tmp_path):
    root = str(tmp_path)
    make_port(root, "rocep1s0f1", [LINK_LOCAL_HEAD], ndev="enp1s0f1np1")
    port = _join(root, {"enp1s0f1np1": ["169.254.35.62/16", "198.18.1.10/24"]}, address="198.18.1.10")["rocep1s0f1"]
    assert (port["gid_index"], port["gid_ipv4"]) == (None, "198.18.1.10")
    assert port["gid_index_by_ipv4"] == {"169.254.35.62": 3, "198.18.1.10": None}


def test_pair_on_link_local_addresses_only(tmp_path):
    head, worker = str(tmp_path / "head"), str(tmp_path / "worker")
    make_port(head, "rocep1s0f1", [LINK_LOCAL_HEAD], ndev="enp1s0f1np1")
    make_port(worker, "rocep1s0f1", [LINK_LOCAL_WORKER], ndev="enp1s0f1np1")
    on_head = _join(head, {"enp1s0f1np1": ["169.254.35.62/16"]}, address="169.254.35.62")["rocep1s0f1"]
    on_worker = _join(worker, {"enp1s0f1np1": ["169.254.35.63/16"]}, address="169.254.35.63")["rocep1s0f1"]
    assert (on_head["gid_index"], on_head["gid_ipv4"]) == (3, "169.254.35.62")
    assert (on_worker["gid_index"], on_worker["gid_ipv4"]) == (3, "169.254.35.63")


def test_address_applies_only_to_the_port_that_carries_it(tmp_path):
    root = str(tmp_path)
    make_port(root, "rocep1s0f1", [LINK_LOCAL_HEAD, STATIC_HEAD], ndev="enp1s0f1np1")
    make_port(root, "roceP2p1s0f1", ["a9fe:0101", "c612:020a"], ndev="enP2p1s0f1np1")
    text = "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)\nrocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n"
    joined = _join(root, {"enp1s0f1np1": ["169.254.35.62/16", "198.18.1.10/24"],
                          "enP2p1s0f1np1": ["169.254.1.1/16", "198.18.2.10/24"]}, address="198.18.1.10", text=text)
    assert (joined["rocep1s0f1"]["gid_index"], joined["rocep1s0f1"]["gid_ipv4"]) == (5, "198.18.1.10")
    assert (joined["roceP2p1s0f1"]["gid_index"], joined["roceP2p1s0f1"]["gid_ipv4"]) == (3, "169.254.1.1")


def test_join_ports_without_netdev_data(tmp_path):
    joined = _join(str(tmp_path), {}, text="rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)\n")["rocep1s0f0"]
    assert joined["state"] == "Down"
    assert joined["operstate"] is None and joined["mtu"] is None and joined["ipv4"] == []
    assert joined["sysfs_state"] is None and joined["gid_index"] is None and joined["gid_ipv4"] is None


def test_run_command_kills_the_whole_group_on_timeout():
    # sh waits on sleep, which keeps stdout open: killing only sh would leave communicate() waiting.
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as exc:
        run_command(["sh", "-c", "sleep 60; echo late"], 1)
    assert time.monotonic() - started < 15
    assert str(exc.value) == "sh -c sleep 60; echo late did not finish within 1 s"


def test_run_command_runs_in_the_c_locale():
    assert run_command(["sh", "-c", "echo $LC_ALL; echo err >&2; exit 4"], 5) == (4, "C\n", "err\n")


def test_gather_ports_reports_a_command_that_cannot_run(tmp_path):
    def broken(argv, timeout):
        raise OSError(errno.EACCES, "Permission denied")

    facts, error = gather_ports(run_command=broken, sysfs_root=str(tmp_path), source="sysfs", address=None, timeout=10)
    assert facts is None
    assert error.startswith("could not run ip (") and error.endswith("-j addr show): [Errno 13] Permission denied")
