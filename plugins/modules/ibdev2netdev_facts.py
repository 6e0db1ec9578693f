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
  - Runs C(ibdev2netdev) when it is installed; otherwise, or when it exits non-zero (it does when
    C(/sys/class/infiniband) is missing), walks the RDMA sysfs tree under O(sysfs_root) and decides
    Up/Down from the netdev's C(carrier) the way the tool does.
  - Joins each port with C(ip -j addr) (operstate, MTU, IPv4 addresses), the sysfs port state and the
    RoCE v2 GID table, and resolves the GID index of the link address (what C(NCCL_IB_GID_INDEX) needs).
  - Every command runs with a timeout; a command that hangs fails the task with its name and the timeout.
  - Read-only; needs no privileges.
options:
  sysfs_root:
    description:
      - Directory that holds C(class/infiniband). V(/sys) on a real node; a test tree elsewhere.
      - Must exist.
    type: path
    default: /sys
  source:
    description:
      - Where the port list comes from.
    type: str
    default: auto
    choices:
      auto: C(ibdev2netdev) when found, else (or when it exits non-zero) the sysfs walk.
      tool: Always C(ibdev2netdev); fails when it is missing or exits non-zero.
      sysfs: Always the sysfs walk under O(sysfs_root).
  address:
    description:
      - The IPv4 address the engines use on the link (plain address, no prefix).
      - On the port whose netdev carries it, RV(ansible_facts.ibdev2netdev.ports[].gid_index) is the RoCE v2
        GID index of this address, or null when it has none. Other ports, and all ports when this is not
        set, take the first of their IPv4 addresses that has a RoCE v2 GID.
      - Set it when a netdev has more than one IPv4, for example the 169.254/16 link-local address that
        NVIDIA's netplan gives each CX7 netdev beside a static address added later.
    type: str
  timeout:
    description:
      - Seconds each external command (C(ibdev2netdev), C(ip)) may run before it is killed and the task
        fails. From 1 to 300.
    type: int
    default: 10
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
  platform:
    support: full
    platforms: posix
    description: Linux with iproute2; the RDMA part needs the RDMA sysfs tree.
requirements:
  - iproute2 (C(ip) with JSON output)
notes:
  - C(state) is the tool's C(Up)/C(Down)/C(NA). C(ibdev2netdev) prints C(Up) only when the netdev's
    C(/sys/class/net/<netdev>/carrier) reads 1, C(Down) when it reads 0 or cannot be read (an admin-down
    netdev), C(NA) when the netdev has no carrier file; the sysfs walk decides the same way. C(operstate)
    (from C(ip)) and C(sysfs_state) (the RDMA port state, V(ACTIVE) when usable for RoCE) are reported
    beside it. All three matter.
  - The GID index is the lowest RoCE v2 entry embedding the address, as NCCL picks it. GID indexes can move
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

- name: Resolve the GID index of the configured link address, not the link-local one
  dgx_spark.glm53.ibdev2netdev_facts:
    address: 198.18.1.10

- name: Read a test sysfs tree instead of /sys
  dgx_spark.glm53.ibdev2netdev_facts:
    sysfs_root: /opt/glm53-lab/sys
    source: sysfs

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
        tool_error:
          description: Why C(ibdev2netdev) was not used although installed (O(source=auto) fell back to sysfs); null otherwise.
          returned: always
          type: str
          sample: /usr/bin/ibdev2netdev exited 255
        address:
          description: The O(address) the GID indexes were resolved for; null when not set.
          returned: always
          type: str
          sample: 198.18.1.10
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
              description:
                - C(Up), C(Down) or C(NA) as C(ibdev2netdev) prints it, from the netdev's carrier (see the notes).
                - Whatever else the tool printed between the parentheses is kept as printed; null when the sysfs walk
                  found no netdev.
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
              description: IPv4 addresses on the netdev with prefix length, in the kernel's order.
              type: list
              elements: str
              sample: [169.254.35.62/16, 198.18.1.10/24]
            gid_index:
              description:
                - RoCE v2 GID index of RV(ansible_facts.ibdev2netdev.ports[].gid_ipv4); null when there is none.
                - This is the C(NCCL_IB_GID_INDEX) value for the port.
              type: int
              sample: 5
            gid_ipv4:
              description:
                - The address RV(ansible_facts.ibdev2netdev.ports[].gid_index) belongs to; O(address) on the port that
                  carries it, else the first IPv4 with a RoCE v2 GID; null when none has one.
              type: str
              sample: 198.18.1.10
            gid_index_by_ipv4:
              description: RoCE v2 GID index of every IPv4 on the netdev (null for an address without one).
              type: dict
              sample: {169.254.35.62: 3, 198.18.1.10: 5}
            roce_v2_ipv4_gids:
              description: Every IPv4-mapped RoCE v2 entry of the port's GID table, by index, with the netdev it belongs to.
              type: list
              elements: dict
              sample: [{ipv4: 169.254.35.62, index: 3, ndev: enp1s0f1np1}, {ipv4: 198.18.1.10, index: 5, ndev: enp1s0f1np1}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ibdev2netdev import (
    SOURCES,
    TIMEOUT_DEFAULT,
    gather_ports,
    run_command,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            source=dict(type="str", default="auto", choices=list(SOURCES)),
            address=dict(type="str"),
            timeout=dict(type="int", default=TIMEOUT_DEFAULT),
        ),
        supports_check_mode=True,
    )
    facts, error = gather_ports(
        run_command=run_command,
        sysfs_root=module.params["sysfs_root"],
        source=module.params["source"],
        address=module.params["address"],
        timeout=module.params["timeout"],
    )
    if error:
        module.fail_json(msg=error)
    module.exit_json(changed=False, ansible_facts={"ibdev2netdev": facts})


if __name__ == "__main__":
    main()
