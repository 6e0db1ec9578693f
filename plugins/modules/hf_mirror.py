#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_mirror
short_description: Copy verified Hugging Face snapshots from the head to a worker with rsync over the CX7 link
version_added: 0.1.0
description:
  - Runs on the head. Copies each snapshot in O(models) from the head's Hugging Face cache to one worker's, with
    rsync over ssh to the worker's link address, so the weights come from the internet once.
  - A snapshot is copied only when the head holds its verified manifest
    (C(<cache_dir>/hub/models--org--name/.glm53/<revision>.json), written by M(dgx_spark.glm53.hf_snapshot)) and
    every file the manifest lists is on the head at the listed size.
  - The worker gets the same cache layout, C(hub/models--org--name/blobs/<hash>) and
    C(snapshots/<revision>/<file>) as the same relative symlinks into C(blobs/); C(refs/) is not copied (everything
    addresses the snapshot by its sha).
  - A blob that is itself a link into C(huggingface_hub)'s shared store (C(<cache_dir>/hub/blobs/<xx>/<hash>), where
    C(huggingface_hub) 2.4 keeps Xet downloads unless C(HF_HUB_DISABLE_SHARED_BLOBS) is set) reaches the worker as a
    regular file with its bytes (rsync C(--copy-links) in the blob passes), so the worker needs no store. Such a link
    is followed only when it stays inside the head's cache; one leading elsewhere fails the task.
  - "Order: the directories (one run, which also fails fast when ssh or the worker's rsync does not work), a dry run
    that finds what the worker lacks by size and modification time, those blobs in up to O(streams) parallel rsync
    processes balanced by bytes (largest first), then the snapshot symlinks, and the manifests last, so a worker never
    holds a manifest before its files. The worker should still verify its copy (M(dgx_spark.glm53.hf_snapshot) with
    C(offline: true))."
  - rsync runs with C(-a --partial --inplace) and never C(-z) (weights do not compress); an interrupted copy resumes
    where it stopped on the next run.
  - Every rsync runs in its own process group with the time left of O(timeout), and is killed with its group when
    that passes.
  - A worker or link that stops answering fails the copy after about O(io_timeout) seconds (rsync C(--timeout), ssh
    C(ServerAliveInterval) and C(ServerAliveCountMax)), naming the worker and its link address.
  - Every rsync of a run is recorded (pid and start time) in
    C(<cache_dir>/hub/.locks/dgx_spark.glm53/mirror-<target>-<key>.json) under a lock held for the whole run, and
    dies with the module (C(setpriv --pdeathsig KILL) from util-linux) even when Ansible's async limit kills it.
    A run first ends what an earlier run to the same O(target) and O(dest) left running, including that run itself
    when its play was interrupted, so two runs never write the same files (RV(ended_writers)).
attributes:
  check_mode:
    support: full
    details:
      - Runs every rsync with C(--dry-run) and reports what would be copied in RV(bytes_copied) and
        RV(files_copied); copies nothing and writes no progress file.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
    details:
      - A second run finds every file on the worker at the same size and time and copies nothing, unless O(force)
        names files, which are sent again every time.
options:
  models:
    description: The snapshots to copy.
    type: list
    elements: dict
    required: true
    suboptions:
      repo_id:
        description: Model repository, C(org/name).
        type: str
        required: true
      revision:
        description: Full 40-hex commit sha of the verified snapshot.
        type: str
        required: true
  cache_dir:
    description: The head's Hugging Face cache root (the directory holding C(hub/)).
    type: path
    default: ~/.cache/huggingface
  dest:
    description:
      - The worker's Hugging Face cache root, as the worker sees it.
      - An absolute path, or a path starting with C(~/), which is relative to the home of the user in O(target)
        (passed to rsync without the C(~/), so it is the remote home, never the head's).
      - Missing directories are created.
    type: str
    default: ~/.cache/huggingface
  target:
    description:
      - The worker as ssh reaches it from the head, C(user@<worker link address>), so the copy goes over the CX7
        link.
      - An empty string copies to O(dest) on this machine, without ssh (a single-machine copy, and the unit tests).
    type: str
    required: true
  ssh_options:
    description:
      - Options of the ssh client rsync runs (its C(-e)). Keep C(BatchMode=yes) so ssh never waits for a password.
      - Returned in RV(commands); put no secrets here.
    type: list
    elements: str
    default: ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10']
  streams:
    description: Most rsync processes copying blobs at once, V(1) to V(16). Fewer run when fewer files are missing.
    type: int
    default: 4
  force:
    description:
      - Files to send again even when the worker's copy has the same size and time, for example a file that failed
        the worker's sha256 verification; they are copied with C(--ignore-times).
      - Each entry names a file of a snapshot as its manifest does. An entry whose repository is not in O(models) is
        skipped with a warning; a name the manifest does not list fails the task.
    type: list
    elements: dict
    default: []
    suboptions:
      repo_id:
        description: Model repository, C(org/name).
        type: str
        required: true
      name:
        description: File name in the snapshot, as in the manifest (e.g. C(model-00001-of-00012.safetensors)).
        type: str
        required: true
  progress_file:
    description:
      - A JSON file on the head rewritten atomically about once a second while the copy runs, for
        M(dgx_spark.glm53.async_progress) or a person watching.
      - "Keys: C(phase) (V(mirror) while copying, then V(done) or V(failed)), C(bytes_done), C(bytes_total),
        C(files_done), C(files_total) (what the worker holds of RV(bytes_total) and RV(files), counted from rsync's
        C(--info=progress2) summed over the streams), C(rate_bps) and C(eta_s) (over the last 30 seconds; null
        until known), C(updated) (epoch seconds)."
    type: path
  timeout:
    description: Seconds the whole copy may take; every rsync gets the time left and is killed when it runs out.
    type: int
    default: 14400
  io_timeout:
    description:
      - Seconds without data after which a copy fails (rsync C(--timeout), passed to the worker's rsync too; ssh
        keepalives every C(io_timeout / 3) seconds, 3 missed end the session). A dead link fails within about this
        time instead of at O(timeout).
      - The ssh keepalive is added after O(ssh_options), so a C(ServerAliveInterval) given there wins.
    type: int
    default: 30
  node:
    description: The worker's name (its inventory name), used in messages beside O(target).
    type: str
  bwlimit:
    description:
      - Most KiB/s for the whole copy; each of the N streams gets C(bwlimit / N) (rsync C(--bwlimit)).
      - No limit when not given.
    type: int
requirements:
  - rsync 3.2.3 or later on the head and on the worker (C(--mkpath)).
  - The OpenSSH client on the head, and ssh from the head to O(target) without a prompt.
notes:
  - Failures name the worker, the rsync command, what its exit code means and the fix, for example
    rsync missing on the head or on the worker, ssh refused, or the worker's disk full (with the bytes free
    there).
  - RV(commands) show the temporary C(--files-from) lists they used; those are removed when the task ends.
  - C(--inplace) rewrites a changed or forced file where it is; do not mirror to a worker whose engine has those
    weights open.
  - Without a working C(setpriv) on the head (util-linux 2.33 or later) the rsync processes outlive a killed module
    until the next run ends them; the task warns.
seealso:
  - name: rsync(1)
    description: The options used, and the exit codes.
    link: https://download.samba.org/pub/rsync/rsync.1
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
---
- name: Copy the verified snapshot from the head to the worker over the CX7 link
  dgx_spark.glm53.hf_mirror:
    models:
      - repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
        revision: 5ab363a8c0ffee0000000000000000000000beef
    target: spark@198.18.1.11
    node: spark-worker
    dest: ~/.cache/huggingface
    progress_file: ~/.local/state/glm53/progress-mirror-spark-worker.json
  delegate_to: spark-head
  register: __glm53_mirror

- name: Show the rate
  ansible.builtin.debug:
    msg: >-
      {{ __glm53_mirror.bytes_copied | human_readable }} in {{ __glm53_mirror.elapsed }} s
      over {{ __glm53_mirror.streams }} streams

- name: Send again a file that failed the worker's sha256 check
  dgx_spark.glm53.hf_mirror:
    models:
      - repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
        revision: 5ab363a8c0ffee0000000000000000000000beef
    target: spark@198.18.1.11
    force:
      - repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
        name: model-00003-of-00012.safetensors

- name: Copy into another cache on this machine (no ssh)
  dgx_spark.glm53.hf_mirror:
    models:
      - repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
        revision: 5ab363a8c0ffee0000000000000000000000beef
    target: ""
    dest: /srv/hf-cache
"""

RETURN = r"""
bytes_copied:
  description:
    - Bytes of the files rsync sent, by its C(--stats) ("Total transferred file size"), summed over every run.
    - In check mode, the bytes that would be sent.
  returned: always
  type: int
  sample: 161061273600
bytes_total:
  description: Bytes the worker holds when the copy is complete (the distinct blobs and the manifests).
  returned: always
  type: int
  sample: 161061285312
files:
  description: Regular files the worker holds when complete (the distinct blobs and the manifests).
  returned: always
  type: int
  sample: 59
files_copied:
  description: Regular files rsync sent (or, in check mode, would send).
  returned: always
  type: int
  sample: 59
links:
  description: Snapshot symlinks kept in step on the worker.
  returned: always
  type: int
  sample: 58
snapshot_files:
  description: Files the manifests list, over all O(models).
  returned: always
  type: int
  sample: 58
items_changed:
  description: Files and links rsync created, sent or changed attributes of (directories' times not counted).
  returned: always
  type: int
  sample: 117
elapsed:
  description: Seconds the task took.
  returned: always
  type: float
  sample: 171.402
rate_bps:
  description: RV(bytes_copied) divided by RV(elapsed), bytes per second. V(0) in check mode.
  returned: always
  type: int
  sample: 939681004
streams:
  description: Parallel rsync processes that copied blobs (V(0) when the worker lacked none).
  returned: always
  type: int
  sample: 4
target:
  description: O(target).
  returned: always
  type: str
  sample: spark@198.18.1.11
destination:
  description: The destination rsync was given for the hub directory (C(target:path/hub/), or a local path).
  returned: always
  type: str
  sample: spark@198.18.1.11:.cache/huggingface/hub/
ended_writers:
  description:
    - Processes of an earlier run to the same destination that still ran and were ended before this run started
      (SIGTERM, then SIGKILL after 5 seconds), as C(pid) and C(command). Empty in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 48213, command: "/usr/bin/rsync -a --partial --inplace ..."}]
commands:
  description:
    - Every rsync run, as its argument list, in the order started.
    - Each ran under C(setpriv --pdeathsig KILL --) when the head has it (not shown).
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/rsync, -a, --partial, --inplace, --mkpath, --files-from=/tmp/glm53-hf-mirror-x1/dirs, --stats,
       "--out-format=GLM53-ITEM %i %l %n", --timeout=30, -e,
       ssh -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=10 -o ServerAliveCountMax=3,
       /home/spark/.cache/huggingface/hub/, "spark@198.18.1.11:.cache/huggingface/hub/"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_mirror import Mirror, MirrorError
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_mirror_inputs import DEFAULT_SSH_OPTIONS, validate
from ansible_collections.dgx_spark.glm53.plugins.module_utils._module_exit import finish

ARGUMENT_SPEC = dict(
    models=dict(type="list", elements="dict", required=True, options=dict(
        repo_id=dict(type="str", required=True),
        revision=dict(type="str", required=True),
    )),
    cache_dir=dict(type="path", default="~/.cache/huggingface"),
    dest=dict(type="str", default="~/.cache/huggingface"),
    target=dict(type="str", required=True),
    ssh_options=dict(type="list", elements="str", default=DEFAULT_SSH_OPTIONS),
    streams=dict(type="int", default=4),
    force=dict(type="list", elements="dict", default=[], options=dict(
        repo_id=dict(type="str", required=True),
        name=dict(type="str", required=True),
    )),
    progress_file=dict(type="path"),
    timeout=dict(type="int", default=14400),
    io_timeout=dict(type="int", default=30),
    node=dict(type="str"),
    bwlimit=dict(type="int"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    errors = validate(module.params)
    if errors:
        module.fail_json(msg="; ".join(errors))
    rsync, setpriv = module.get_bin_path("rsync"), module.get_bin_path("setpriv")
    finish(module, lambda: Mirror(module.params, rsync, check_mode=module.check_mode, setpriv=setpriv).run(),
           MirrorError)


if __name__ == "__main__":
    main()
