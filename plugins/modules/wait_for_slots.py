#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: wait_for_slots
short_description: Wait until the GLM-5.3 engine serves with all its request slots, or say what is missing
version_added: 0.1.0
description:
  - Runs on the head node after the ranks were started and polls every O(interval) seconds until the engine
    is ready or O(timeout) seconds passed. Fails with a message that names the missing piece, the node,
    what was wanted, what was found and the fix.
  - "Ready with O(mode=tensorfold): every rank container is running; C(/health) answers 200 B(and) its body
    says C(ok: true) (the kit's C(/health) answers 200 with C(ok: false) after a fatal engine error, so 200
    alone proves nothing); C(/v1/models) lists a model (O(served_name) when given); the request slots reach
    O(slots) - the last 'K request slot(s)' line of the rank-0 log (else the last C(batching K requests)),
    and C(/health) C(streams.max) on images that have it (patch 0600); every source that reports must reach
    O(slots). Then the canary."
  - Ready with O(mode=vllm) - every rank container is running; C(/health) answers 200; C(/v1/models) lists
    O(served_name) (any model when not given). Then the canary. O(slots) is not checked (vLLM has no slot line).
  - The canary (O(canary)) is one short greedy chat completion of O(canary_max_tokens) tokens to the served
    model; it must return non-empty content or reasoning within O(canary_timeout) seconds. A tensor-parallel
    hang leaves C(/health) and C(/v1/models) answering while no token comes; only the canary sees it. A
    failed canary fails the task at once.
  - Fails fast, without waiting out O(timeout), when a rank container exited or was OOM-killed (there is no
    restart policy, so it does not come back), returning its last O(log_lines) log lines, or when a worker
    was unreachable over ssh 3 checks in a row. A container that does not exist (yet) is waited for.
  - Rank 0 (O(head_container)) is checked with the local C(docker inspect) on every poll; each worker with
    C(ssh -o BatchMode=yes -o ConnectTimeout=5 <ssh> docker inspect ...), at most every 10 seconds (each
    login costs the worker) and once more before declaring ready. All checks of a worker share one ssh
    connection (OpenSSH connection sharing, a socket in a private temporary directory), closed at the end.
  - "The rank-0 log is read once from the container's start, then only the lines that came since the last read
    (C(docker logs --timestamps --since)), because a service that ran for weeks has a long log."
  - Every command runs with a deadline and is killed with its process group when it passes it; HTTP
    requests time out after 5 seconds (less near the deadline), so a wedged server cannot hold a poll.
attributes:
  check_mode:
    support: full
    details:
      - Only looks (HTTP requests, C(docker inspect), C(docker logs)), so it polls in check mode too.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
    details:
      - Never reports a change. The canary is a real, short request to the engine.
options:
  mode:
    description: Which engine serves, the TensorFold kit or vLLM.
    type: str
    default: tensorfold
    choices: [tensorfold, vllm]
  url:
    description: Base URL of the engine's API on rank 0, without C(/v1).
    type: str
    default: http://127.0.0.1:8000
  slots:
    description:
      - Request slots the engine must have loaded (O(mode=tensorfold)); at least V(1). The engine decides at
        load how many fit; page cache left on a GB10 makes it load fewer.
    type: int
    default: 8
  timeout:
    description:
      - Seconds to wait for readiness. A first start compiles kernels and writes prepared weights for 8
        minutes or more; later starts take 20-60 seconds.
      - The canary may run up to O(canary_timeout) past it, so with C(async) allow O(timeout) +
        O(canary_timeout) + 30.
    type: float
    default: 600
  interval:
    description: Seconds between polls; more than V(0) and at most O(timeout).
    type: float
    default: 1
  head_container:
    description:
      - Name of the rank-0 container on this node, checked with the local C(docker inspect). Its log gives the
        slot count.
      - Defaults to V(glm53-tf-r0) with O(mode=tensorfold) and V(glm53-vllm) with O(mode=vllm).
      - V('') checks no container on this node, for a single-process server that runs outside Docker; with
        O(mode=tensorfold) the slot count then comes from C(/health) C(streams.max) only.
    type: str
  workers:
    description:
      - The worker ranks, in rank order (the first is rank 1), checked over ssh from this node. V([]) checks
        none; with O(head_container=''), no container is checked at all.
    type: list
    elements: dict
    default: []
    suboptions:
      ssh:
        description: ssh target of the worker, C(user@host) or C(host), reachable with BatchMode (keys, no prompt).
        type: str
        required: true
      container:
        description: The rank container there. Defaults to C(glm53-tf-r<rank>) (tensorfold) or V(glm53-vllm) (vllm).
        type: str
      node:
        description: Name of the worker in messages and results. Defaults to the host part of O(workers[].ssh).
        type: str
      image:
        description: The full image id (C(sha256:...)) the worker's rank must run; see O(head_image).
        type: str
  ssh_options:
    description:
      - Extra ssh arguments, placed before the module's C(-o BatchMode=yes -o ConnectTimeout=5) so they win
        for the same option (ssh keeps the first value it sees), for example V([-o, ConnectTimeout=10]).
    type: list
    elements: str
    default: []
  canary:
    description: Send the canary chat completion once everything else is ready.
    type: bool
    default: true
  canary_timeout:
    description: Seconds the canary may take.
    type: float
    default: 30
  canary_max_tokens:
    description: C(max_tokens) of the canary; at least V(1).
    type: int
    default: 4
  served_name:
    description:
      - The model name the engine serves (C(--served-model-name) / C(SERVED_NAME)); it must be listed by
        C(/v1/models) and the canary asks it. Defaults to the first id C(/v1/models) lists.
    type: str
  log_lines:
    description: Log lines of a failed rank to return (C(docker logs --tail)); at least V(1).
    type: int
    default: 40
  start_finished:
    description:
      - No start is under way (for example C(serve.sh start) returned, or nothing was started), so what waiting
        cannot change fails at once - a slot count the serving engine reports below O(slots) (the engine fits
        its slots once, at load), and a rank container that does not exist.
      - Leave V(false) while a start may still create the ranks or restart the engine with the caches dropped
        (the kit's slot retries).
    type: bool
    default: false
    aliases: [slots_final]
  previous_ids:
    description:
      - Container ids of the ranks seen before a start. A rank whose container has one of them is the old
        service, not one the start made, and is never called ready (with O(start_finished) it fails at once).
        A start that did not replace the ranks - the kit's C(start) refuses while a CUDA process runs on a
        node - otherwise leaves the old service answering every check.
    type: list
    elements: str
    default: []
  head_image:
    description:
      - The full image id (C(sha256:...)) rank 0 must run, for example the id of the image a build just made
        on this node. A rank on another image is never called ready (with O(start_finished) it fails at once).
    type: str
  busy_ok:
    description:
      - A canary that gets no answer in O(canary_timeout) is not a failure when C(/health) shows requests in
        flight and the engine's progress counters in C(/metrics) grew meanwhile - every slot is taken and the
        canary waited its turn. Ready then, with RV(busy). For probing a service in production.
      - In flight with no progress is what a tensor-parallel hang shows; that still fails.
    type: bool
    default: false
requirements:
  - The C(docker) CLI usable by the connecting user without sudo on this node and on the workers, and the
    OpenSSH client on this node when O(workers) is not empty.
notes:
  - Run it on the head (rank 0's node). The API is usually bound to C(127.0.0.1) there.
  - A rank container that does not exist is waited for (a start may still be creating it) and named in the
    timeout message; with O(start_finished) it fails at once.
  - With too few slots it waits for the whole O(timeout) (a start may restart the ranks after dropping the page
    cache, as the kit's C(SLOT_RETRIES) does), then names the count found, the count wanted and the fix.
seealso:
  - module: dgx_spark.glm53.page_cache_evict
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
---
- name: Wait for the TensorFold kit with 8 request slots on both ranks
  dgx_spark.glm53.wait_for_slots:
    slots: 8
    timeout: 900
    workers:
      - ssh: spark@spark-worker
        container: glm53-tf-r1
        node: spark-worker
  register: __glm53_ready

- name: Wait for the vLLM pair serving its model
  dgx_spark.glm53.wait_for_slots:
    mode: vllm
    served_name: glm-5.3-flash-nvfp4-sm121
    timeout: 3600
    interval: 15
    workers:
      - ssh: spark@spark-worker

- name: A single-process engine outside Docker (no container checks; slots from /health streams.max)
  dgx_spark.glm53.wait_for_slots:
    url: http://127.0.0.1:8000
    head_container: ""
    workers: []
    slots: 4
"""

RETURN = r"""
ready:
  description: The engine is ready (false in a failed result).
  returned: always
  type: bool
  sample: true
slots:
  description:
    - Request slots found (O(mode=tensorfold)) - the smallest count the rank-0 log and C(/health) C(streams.max)
      report; null when neither reports one, and always with O(mode=vllm).
  returned: always
  type: int
  sample: 8
elapsed:
  description: Seconds the wait took.
  returned: always
  type: float
  sample: 23.514
health:
  description: The last C(/health) body, parsed when it is JSON (null when nothing answered or the body was empty).
  returned: always
  type: raw
  sample: {"ok": true, "mode": "basic", "uptime_s": 2860.0, "inflight": 0, "oldest_s": 0.0, "idle_s": 0.0,
           "requests": 654, "errors": 0}
models:
  description: Model ids of the last C(/v1/models) answer (null when it did not answer 200).
  returned: always
  type: list
  elements: str
  sample: [GLM-5.3-Flash-EXL3]
ranks:
  description: The last state seen of each rank container checked, rank 0 first (empty when none is checked).
  returned: always
  type: list
  elements: dict
  contains:
    rank:
      description: Rank number; 0 is O(head_container), then O(workers) in order.
      type: int
      sample: 1
    node:
      description: This node's host name for rank 0, else O(workers[].node).
      type: str
      sample: spark-worker
    container:
      description: Container name.
      type: str
      sample: glm53-tf-r1
    state:
      description:
        - V(running); V(created) (not started yet); V(exited); V(oom) (stopped and OOM-killed); V(absent)
          (no such container); V(unreachable) (ssh failed with 255); V(unknown) (the check could not tell,
          see RV(ranks[].error)).
      type: str
      sample: exited
    exit_code:
      description: C(State.ExitCode); null when not inspected.
      type: int
      sample: 1
    oom_killed:
      description: C(State.OOMKilled); null when not inspected.
      type: bool
      sample: false
    log_tail:
      description: The last O(log_lines) log lines of a rank that exited or was OOM-killed; null otherwise.
      type: list
      elements: str
      sample: ["[boot] r1 +4.1s container started", "RuntimeError: NCCL error: remote process exited"]
    error:
      description: Why the state is V(absent), V(unreachable) or V(unknown), or why its log could not be read; else null.
      type: str
      sample: "ssh: connect to host spark-worker port 22: Connection timed out"
    id:
      description: The container's full id; null when not inspected.
      type: str
      sample: 3f2c9a0e5b7d41c2a8e6f0d9b1c3e5a7f9d2b4c6e8a0f1d3b5c7e9a1f3d5b7c9
    image:
      description: The full id of the image the container runs; null when not inspected.
      type: str
      sample: sha256:9b1c3e5a7f9d2b4c6e8a0f1d3b5c7e9a1f3d5b7c93f2c9a0e5b7d41c2a8e6f0d
    started_at:
      description: C(State.StartedAt); null when not inspected.
      type: str
      sample: "2026-12-01T09:12:01.512345678Z"
canary:
  description: The canary's outcome; null when it did not run (O(canary=false), or not ready before it).
  returned: always
  type: dict
  contains:
    ok:
      description: It returned non-empty content or reasoning in time.
      type: bool
      sample: true
    elapsed:
      description: Seconds it took.
      type: float
      sample: 0.412
    tokens:
      description: C(usage.completion_tokens) of the answer; null when it had none.
      type: int
      sample: 4
    text:
      description: The content, else the reasoning, it returned; null when none.
      type: str
      sample: ready
    error:
      description: What went wrong; null when RV(canary.ok).
      type: str
      sample: returned no tokens within 30 s
busy:
  description: With O(busy_ok), the canary got no answer because the engine was busy with other requests (it made
    progress meanwhile); the service is judged ready without the canary.
  returned: always
  type: bool
  sample: false
reason:
  description: Null when ready; else the missing piece (the failure message without the timeout prefix).
  returned: always
  type: str
  sample: "rank-0 log reports 1 request slot(s), want 8: page cache counts as used at load on GB10, evict it ..."
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import PATHS
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness import validate
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness_poll import Waiter

ARGUMENT_SPEC = dict(
    mode=dict(type="str", default="tensorfold", choices=list(PATHS)),
    url=dict(type="str", default="http://127.0.0.1:8000"),
    slots=dict(type="int", default=8),
    timeout=dict(type="float", default=600),
    interval=dict(type="float", default=1),
    head_container=dict(type="str"),
    workers=dict(type="list", elements="dict", default=[], options=dict(
        ssh=dict(type="str", required=True),
        container=dict(type="str"),
        node=dict(type="str"),
        image=dict(type="str"),
    )),
    ssh_options=dict(type="list", elements="str", default=[]),
    canary=dict(type="bool", default=True),
    canary_timeout=dict(type="float", default=30),
    canary_max_tokens=dict(type="int", default=4, no_log=False),
    served_name=dict(type="str"),
    log_lines=dict(type="int", default=40),
    start_finished=dict(type="bool", default=False, aliases=["slots_final"]),
    previous_ids=dict(type="list", elements="str", default=[]),
    head_image=dict(type="str"),
    busy_ok=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # Checked up front, outside any except block: ansible-core 2.19 shows a fail_json
    # called while an exception is handled as "An exception occurred".
    errors = validate(module.params)
    if errors:
        module.fail_json(msg="; ".join(errors))
    result, msg = Waiter(module.params).run()
    if msg:
        module.fail_json(msg=msg, changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
