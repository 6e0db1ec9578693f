"""cx7_link's per-node link: an explicit role input is never silently overridden by the
inventory's site value, the per-node values come only from glm53_link_* and
glm53_sysfs_root, and the undocumented cx7_link_address is not read."""

import os

import yaml

from ansible_collections.dgx_spark.glm53.plugins.filter.cx7_link import cx7_link_node_config

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
UNSET = {"netdev": None, "second_netdev": None, "sysfs_root": None}
INVENTORY = {"glm53_link_netdev": "auto", "glm53_link_second_netdev": "auto", "glm53_sysfs_root": "/sys",
             "glm53_link_address": "198.18.1.11"}


def test_an_explicit_role_input_wins_over_the_inventorys_auto():
    # -e cx7_link_netdev=enp1s0f1np1 with group_vars glm53_link_netdev: auto (issue 16 item 7).
    explicit = dict(UNSET, netdev="enp1s0f1np1", second_netdev="", sysfs_root="/opt/sys")
    assert cx7_link_node_config(INVENTORY, explicit) == {
        "netdev": "enp1s0f1np1", "second_netdev": "", "address": "198.18.1.11", "sysfs_root": "/opt/sys"}


def test_unset_role_inputs_take_each_nodes_own_site_values():
    node = dict(INVENTORY, glm53_link_netdev="enP2p1s0f1np1", glm53_link_second_netdev="")
    assert cx7_link_node_config(node, UNSET) == {
        "netdev": "enP2p1s0f1np1", "second_netdev": "", "address": "198.18.1.11", "sysfs_root": "/sys"}


def test_nothing_set_anywhere_gives_the_site_defaults():
    assert cx7_link_node_config({}, UNSET) == {"netdev": "auto", "second_netdev": "auto", "address": "",
                                               "sysfs_root": "/sys"}


def test_cx7_link_address_is_not_read():
    node = {"cx7_link_address": "10.9.9.9", "glm53_link_address": "198.18.1.10"}
    assert cx7_link_node_config(node, UNSET)["address"] == "198.18.1.10"
    assert cx7_link_node_config({"cx7_link_address": "10.9.9.9"}, UNSET)["address"] == ""


def test_the_roles_link_inputs_are_unset_by_default():
    # A default that copied glm53_link_netdev could not be told from an explicit input.
    with open(os.path.join(ROOT, "roles", "cx7_link", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert [defaults[k] for k in ("cx7_link_netdev", "cx7_link_second_netdev", "cx7_link_sysfs_root")] == [None] * 3
