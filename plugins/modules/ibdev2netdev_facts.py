#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ibdev2netdev_facts
short_description: Map RDMA ports to netdevs with state, MTU, IPv4 and RoCE v2 GID index
version_added: 0.1.0
description:
  - Lists every RDMA port of the node (the two functions of a DGX Spark ConnectX-7 port show up as
    C(rocep1s0f1) and C(roceP2p1s0f1)) with the netdev behind it, as C(ibdev2netdev) prints it.
  - Runs C(ibdev2netdev) when it is installed; otherwise walks the RDMA sysfs tree under O(sysfs_root)
    the same way the tool does.
  - Joins each port with C(ip -j addr) (operstate, MTU, IPv4 addresses; the address dump carries the
    link fields of C(ip -j link) too), the sysfs port state and the RoCE v2 GID table, and resolves
    the GID index whose value embeds the netdev's IPv4 (what C(NCCL_IB_GID_INDEX) needs).
  - Read-only; needs no privileges.
options:
  sysfs_root:
    description:
      - Directory that holds C(class/infiniband). V(/sys) on a real node; a test tree elsewhere.
    type: path
    default: /sys
  source:
    description:
      - Where the port list comes from.
    type: str
    default: auto
    choices:
      auto: C(ibdev2netdev) when found in the PATH, else the sysfs walk.
      tool: Always C(ibdev2netdev); fails when it is missing.
      sysfs: Always the sysfs walk under O(sysfs_root).
attributes:
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: none
    description: Reports facts; there is nothing to diff.
  facts:
    support: full
    description: Sets RV(ansible_facts.ibdev2netdev).
  idempotent:
    support: full
    description: Never changes anything.
requirements:
  - iproute2 (C(ip) with JSON output)
notes:
  - C(state) is the tool's C(Up)/C(Down), which reflects the netdev operstate; C(sysfs_state) is the
    RDMA port state (V(ACTIVE) when usable for RoCE). Both matter.
  - The GID index is the lowest RoCE v2 entry embedding the IPv4, as NCCL picks it. GID indexes can move
    after a link flap, so read them right before use.
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
seealso:
  - name: NVIDIA DGX Spark, connect two Sparks
    description: The ibdev2netdev mapping of the CX7 functions and netplan addressing.
    link: https://build.nvidia.com/spark/connect-two-sparks
"""

EXAMPLES = r"""
- name: Read the CX7 port map
  dgx_spark.glm53.ibdev2netdev_facts:

- name: Read a test sysfs tree instead of /sys
  dgx_spark.glm53.ibdev2netdev_facts:
    sysfs_root: /opt/glm53-lab/sys

- name: Show the GID index of the link netdev
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.ibdev2netdev.ports
         | selectattr('netdev', 'equalto', 'enp1s0f1np1')
         | map(attribute='gid_index') | first }}
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    ibdev2netdev:
      description: The port map.
      returned: always
      type: complex
      contains:
        source:
          description: Where the port list came from.
          returned: always
          type: str
          sample: tool
        sysfs_root:
          description: The sysfs root that was read.
          returned: always
          type: str
          sample: /sys
        unparsed:
          description: Tool output lines that were not understood (normally empty).
          returned: always
          type: list
          elements: str
          sample: []
        ports:
          description: One entry per RDMA port.
          returned: always
          type: list
          elements: dict
          contains:
            hca:
              description: RDMA device name (C(NCCL_IB_HCA) value).
              type: str
              sample: rocep1s0f1
            port:
              description: RDMA port number.
              type: int
              sample: 1
            netdev:
              description: Netdev behind the port; null when it cannot be found.
              type: str
              sample: enp1s0f1np1
            state:
              description: C(Up)/C(Down) as C(ibdev2netdev) prints it (from the netdev operstate when the tool is absent).
              type: str
              sample: Up
            sysfs_state:
              description: RDMA port state from sysfs without the number; null when unreadable.
              type: str
              sample: ACTIVE
            phys_state:
              description: Physical port state from sysfs; null when unreadable.
              type: str
              sample: LinkUp
            link_layer:
              description: Link layer from sysfs; null when unreadable.
              type: str
              sample: Ethernet
            operstate:
              description: Netdev operstate from C(ip); null when the netdev does not exist.
              type: str
              sample: UP
            mtu:
              description: Netdev MTU; null when the netdev does not exist.
              type: int
              sample: 9000
            ipv4:
              description: IPv4 addresses on the netdev with prefix length.
              type: list
              elements: str
              sample: [198.18.1.10/24]
            gid_index:
              description: Lowest RoCE v2 GID index embedding the first IPv4 that has one; null when none does.
              type: int
              sample: 3
            gid_index_by_ipv4:
              description: RoCE v2 GID index for each of the netdev's IPv4 addresses that has one.
              type: dict
              sample: {198.18.1.10: 3}
            roce_v2_ipv4_gids:
              description: Every IPv4-mapped RoCE v2 GID of the port (for diagnosis).
              type: list
              elements: dict
              sample: [{ipv4: 198.18.1.10, index: 3}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ibdev2netdev import (
    join_ports,
    parse_ibdev2netdev,
    parse_ip_json,
    read_sysfs_port,
    walk_sysfs,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            source=dict(type="str", default="auto", choices=["auto", "tool", "sysfs"]),
        ),
        supports_check_mode=True,
    )
    sysfs_root = module.params["sysfs_root"]
    source = module.params["source"]
    unparsed = []

    tool = None
    if source != "sysfs":
        tool = module.get_bin_path("ibdev2netdev", required=(source == "tool"))
    if tool:
        rc, out, err = module.run_command([tool], environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg="ibdev2netdev failed (rc=%d): %s" % (rc, (err or out).strip()), rc=rc,
                             stdout=out, stderr=err)
        ports, unparsed = parse_ibdev2netdev(out)
        used = "tool"
    else:
        ports = [dict(entry, state=None) for entry in walk_sysfs(sysfs_root)]
        used = "sysfs"

    ip_bin = module.get_bin_path("ip", required=True, opt_dirs=["/usr/sbin", "/sbin"])
    rc, out, err = module.run_command([ip_bin, "-j", "addr", "show"], environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="'ip -j addr show' failed (rc=%d): %s" % (rc, err.strip()), rc=rc)
    try:
        ip_info = parse_ip_json(addr_text=out)
    except ValueError as exc:
        module.fail_json(msg="'ip -j addr show' did not print JSON (iproute2 too old?): %s" % exc)

    sysfs_ports = {}
    for entry in ports:
        key = (entry["hca"], entry["port"])
        if key not in sysfs_ports:
            sysfs_ports[key] = read_sysfs_port(sysfs_root, entry["hca"], entry["port"])

    facts = {
        "source": used,
        "sysfs_root": sysfs_root,
        "unparsed": unparsed,
        "ports": join_ports(ports, ip_info, sysfs_ports),
    }
    module.exit_json(changed=False, ansible_facts={"ibdev2netdev": facts})


if __name__ == "__main__":
    main()
