#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: link_probe
short_description: Probe the links between DGX Sparks with DF pings, a TCP listener or connector, and ssh
version_added: 0.1.0
description:
  - Runs whichever probes are given, all at the same time and each with a deadline, in one invocation
    (one round trip to the node) - O(pings), don't-fragment pings at full frame size over given
    netdevs, all in parallel; O(listen), a short-lived TCP listener; O(connect), a TCP connect retried
    until it works or its deadline passes; O(ssh), a command over ssh.
  - Never fails because of a probe's outcome; the results say what happened and the caller
    judges them. Fails only on invalid input, naming the option.
  - Every command it runs (C(ping), C(ssh)) runs in its own process group with a deadline; a command
    still running at its deadline is killed with its whole process group, and its result says so
    (RV(ssh.timed_out), RV(ssh.error)) naming the command and the timeout.
  - The listener and the connector do not need to start at the same time. Start the listener with
    C(async) and C(poll=0) in one task, run the connectors in a later task, then collect the listener
    with M(ansible.builtin.async_status). The connector retries every 0.1 seconds, so it may
    even start before the listener. This works with C(forks=1); with C(serial), start and collect the
    listener in plays of their own, before and after the play that connects.
attributes:
  check_mode:
    support: full
    details:
      - Changes nothing, so it runs every probe in check mode too.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
options:
  pings:
    description:
      - DF pings to send, all at once, as
        C(ping -M do -s SIZE -c PING_COUNT -i PING_INTERVAL -W PING_TIMEOUT -I NETDEV TARGET).
      - Each ping may take PING_COUNT * PING_INTERVAL + PING_TIMEOUT + 2 seconds before it is killed.
    type: list
    elements: dict
    suboptions:
      netdev:
        description: Interface to send from (C(ping -I)).
        type: str
        required: true
      target:
        description: Address to ping.
        type: str
        required: true
      size:
        description:
          - ICMP payload bytes (C(ping -s)), V(0) to V(65507). MTU - 28 fills exactly one IPv4 frame.
        type: int
        required: true
      peer:
        description: Name of the node behind O(pings[].target), echoed in the result.
        type: str
  ping_count:
    description: Echo requests per ping (C(ping -c)), V(1) to V(20).
    type: int
    default: 2
  ping_interval:
    description: Seconds between echo requests (C(ping -i)), V(0.2) to V(10); C(ping) refuses less to non-root users.
    type: float
    default: 0.2
  ping_timeout:
    description: Seconds to wait for each reply (C(ping -W)), V(1) to V(60).
    type: int
    default: 2
  listen:
    description:
      - Listen on O(listen.address):O(listen.port) (with C(SO_REUSEADDR)) until O(listen.expect)
        connections were accepted or O(listen.timeout) seconds passed. Each connection is closed
        at once, and the socket before the module returns, so nothing is left listening.
      - Meant to run with C(async) (above O(listen.timeout)) and C(poll=0) before the connectors start.
    type: dict
    suboptions:
      address:
        description: Local address to bind.
        type: str
        required: true
      port:
        description: TCP port, V(1) to V(65535).
        type: int
        required: true
      timeout:
        description: Seconds to wait for the connections, V(0.1) to V(3600).
        type: float
        default: 60.0
      expect:
        description: Connections to wait for (one per connecting node), V(1) to V(128).
        type: int
        default: 1
  connect:
    description:
      - Connect to O(connect.address):O(connect.port), retrying every 0.1 seconds on any error (a refused
        connection usually means the listener has not started yet) until connected or
        O(connect.timeout) seconds passed. The connection is closed at once.
    type: dict
    suboptions:
      address:
        description: Address (or name) to connect to.
        type: str
        required: true
      port:
        description: TCP port, V(1) to V(65535).
        type: int
        required: true
      timeout:
        description: Seconds to keep trying, V(0.1) to V(3600).
        type: float
        default: 30.0
  ssh:
    description:
      - For each entry, run C(ssh OPTIONS TARGET COMMAND), stdin from C(/dev/null) and without a terminal (so it
        cannot prompt), killed with its process group after O(ssh[].timeout) seconds. All entries run at once
        (the head reaches every worker in one round trip).
    type: list
    elements: dict
    suboptions:
      worker:
        description: A label returned with the result, for example the worker's inventory name.
        type: str
      target:
        description: C(user@host) or C(host).
        type: str
        required: true
      options:
        description: Arguments placed before the target, for example V([-o, BatchMode=yes, -o, ConnectTimeout=5]).
        type: list
        elements: str
        default: []
      command:
        description: Remote command, one string as ssh passes it to the remote shell.
        type: str
        required: true
      timeout:
        description: Seconds before ssh and everything it started are killed, V(0.1) to V(3600).
        type: float
        default: 30.0
requirements:
  - C(ping) from iputils for O(pings); the OpenSSH client for O(ssh).
notes:
  - The results of O(listen) arrive only once it finished; with C(async) read them from
    M(ansible.builtin.async_status).
  - A firewall that rejects shows as RV(connect.error) C(ECONNREFUSED) after the whole
    O(connect.timeout), like a port nobody listens on; one that drops shows as C(no answer).
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
---
- name: DF-ping the peers at full MTU and run docker ps over ssh, in one round trip
  dgx_spark.glm53.link_probe:
    pings:
      - netdev: enp1s0f1np1
        target: 198.18.1.2
        size: 8972
        peer: spark-2
    ssh:
      target: ops@198.18.1.2
      options: [-o, BatchMode=yes, -o, ConnectTimeout=5]
      command: docker ps -q
      timeout: 20
  register: __glm53_probe

# The master-port probe across nodes: listener first (async), connectors next, then collect.
- name: Listen on the head for one connection per worker
  dgx_spark.glm53.link_probe:
    listen:
      address: 198.18.1.1
      port: 29551
      timeout: 60
      expect: 1
  async: 75
  poll: 0
  register: __glm53_listener
  when: inventory_hostname == groups['spark_head'][0]

- name: Connect from each worker to the head
  dgx_spark.glm53.link_probe:
    connect:
      address: 198.18.1.1
      port: 29551
      timeout: 30
  register: __glm53_connect
  when: inventory_hostname != groups['spark_head'][0]

- name: Collect the listener
  ansible.builtin.async_status:
    jid: "{{ __glm53_listener.ansible_job_id }}"
  register: __glm53_listen
  until: __glm53_listen.finished
  retries: 75
  delay: 1
  when: inventory_hostname == groups['spark_head'][0]
"""

RETURN = r"""
pings:
  description: One result per O(pings) entry, in order. None when O(pings) was not given.
  returned: always
  type: list
  elements: dict
  contains:
    netdev:
      description: O(pings[].netdev).
      type: str
      sample: enp1s0f1np1
    target:
      description: O(pings[].target).
      type: str
      sample: 198.18.1.2
    peer:
      description: O(pings[].peer).
      type: str
      sample: spark-2
    size:
      description: O(pings[].size).
      type: int
      sample: 8972
    rc:
      description:
        - C(ping)'s exit status; V(1) when no reply came, V(2) on other errors (for example a DF
          packet larger than the MTU). Negative when killed by a signal, null when it could not be run.
      type: int
      sample: 0
    ok:
      description: At least one reply came back (C(rc) V(0)) in time.
      type: bool
      sample: true
    command:
      description: The command as run.
      type: str
      sample: ping -M do -s 8972 -c 2 -i 0.2 -W 2 -I enp1s0f1np1 198.18.1.2
    error:
      description:
        - Null when RV(pings[].ok). Otherwise why, joined with C(; ) - the timeout or a failure to
          start, C(ping)'s error lines without its warnings, and its packet loss summary.
      type: str
      sample: "ping: local error: message too long, mtu=1500; 2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 1001ms"
    timed_out:
      description: C(ping) was still running at its deadline and was killed.
      type: bool
      sample: false
listen:
  description: What O(listen) saw. None when O(listen) was not given.
  returned: always
  type: dict
  contains:
    address:
      description: O(listen.address).
      type: str
      sample: 198.18.1.1
    port:
      description: O(listen.port).
      type: int
      sample: 29551
    bound:
      description: The port could be bound and listened on. False when another socket holds it.
      type: bool
      sample: true
    accepted:
      description: Addresses of the peers whose connections were accepted, in order.
      type: list
      elements: str
      sample: [198.18.1.2]
    error:
      description: Null when RV(listen.bound) and O(listen.expect) connections came; otherwise why not.
      type: str
      sample: "cannot listen on 198.18.1.1:29551: EADDRINUSE (Address already in use)"
    elapsed:
      description: Seconds spent.
      type: float
      sample: 2.311
connect:
  description: What O(connect) saw. None when O(connect) was not given.
  returned: always
  type: dict
  contains:
    address:
      description: O(connect.address).
      type: str
      sample: 198.18.1.1
    port:
      description: O(connect.port).
      type: int
      sample: 29551
    connected:
      description: A connection was established before the deadline.
      type: bool
      sample: true
    error:
      description: Null when connected; otherwise the deadline, the attempts and the last error.
      type: str
      sample: "no connection to 198.18.1.1:29551 within 30s (288 attempts); last error: ECONNREFUSED (Connection refused)"
    attempts:
      description: Connection attempts made.
      type: int
      sample: 3
    elapsed:
      description: Seconds spent.
      type: float
      sample: 0.214
ssh:
  description: What each O(ssh) entry did, in order. None when O(ssh) was not given.
  returned: always
  type: list
  elements: dict
  contains:
    rc:
      description:
        - The exit status of ssh, which is the remote command's, or V(255) when ssh itself failed
          (unreachable, host key, authentication). Negative when killed by a signal (V(-15) after a
          timeout), null when ssh could not be run.
      type: int
      sample: 0
    stdout:
      description: Standard output.
      type: str
      sample: "3f2a1b9c0d1e\n"
    stderr:
      description: Standard error.
      type: str
      sample: ""
    timed_out:
      description: ssh was still running at O(ssh[].timeout) and was killed with its process group.
      type: bool
      sample: false
    command:
      description: The command as run, quoted for a shell.
      type: str
      sample: ssh -o BatchMode=yes -o ConnectTimeout=5 ops@198.18.1.2 'docker ps -q'
    timeout:
      description: O(ssh[].timeout).
      type: float
      sample: 20.0
    error:
      description: Null unless ssh timed out or could not be run; then it names the command and the timeout.
      type: str
      sample: "`ssh -o BatchMode=yes ops@198.18.1.2 'docker ps -q'` did not finish within 20s; its process group was killed"
    target:
      description: O(ssh[].target).
      type: str
      sample: ops@198.18.1.2
    worker:
      description: O(ssh[].worker).
      type: str
      sample: spark-worker
elapsed:
  description: Seconds the module took for all probes together.
  returned: always
  type: float
  sample: 2.403
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._link_probe import (
    probe,
    validate,
)

ARGUMENT_SPEC = dict(
    pings=dict(type="list", elements="dict", options=dict(
        netdev=dict(type="str", required=True),
        target=dict(type="str", required=True),
        size=dict(type="int", required=True),
        peer=dict(type="str"),
    )),
    ping_count=dict(type="int", default=2),
    ping_interval=dict(type="float", default=0.2),
    ping_timeout=dict(type="int", default=2),
    listen=dict(type="dict", options=dict(
        address=dict(type="str", required=True),
        port=dict(type="int", required=True),
        timeout=dict(type="float", default=60.0),
        expect=dict(type="int", default=1),
    )),
    connect=dict(type="dict", options=dict(
        address=dict(type="str", required=True),
        port=dict(type="int", required=True),
        timeout=dict(type="float", default=30.0),
    )),
    ssh=dict(type="list", elements="dict", options=dict(
        worker=dict(type="str"),
        target=dict(type="str", required=True),
        options=dict(type="list", elements="str", default=[]),
        command=dict(type="str", required=True),
        timeout=dict(type="float", default=30.0),
    )),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    # Checked up front, outside any except block: ansible-core 2.19 shows a fail_json
    # called while an exception is handled as "An exception occurred".
    errors = validate(params)
    if errors:
        module.fail_json(msg="; ".join(errors))
    result = probe(
        pings=params["pings"],
        ping_count=params["ping_count"],
        ping_interval=params["ping_interval"],
        ping_timeout=params["ping_timeout"],
        listen_spec=params["listen"],
        connect_spec=params["connect"],
        ssh_spec=params["ssh"],
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
