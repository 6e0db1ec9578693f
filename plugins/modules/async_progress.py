#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: async_progress
short_description: Wait for an async job on a node and print its progress lines meanwhile
version_added: 0.1.0
description:
  - Waits for a job started with C(async) and C(poll=0), like M(ansible.builtin.async_status) in a retry loop, and
    returns the job's own result (its return values, C(changed), C(failed) and C(msg)) when it ends.
  - While it runs, every O(interval) seconds it reads the job's progress file on the node (a small JSON file the
    job rewrites with C(bytes_done), C(bytes_total), C(rate_bps), C(eta_s), C(files_done), C(files_total), C(phase)
    and C(message)), or the last line of O(log_file), and prints one line in the play output, for example
    C([spark-head] weights - 1.2 GB of 3.4 GB (35%), 48.1 MB/s, ETA 46 s, 2 of 9 files (1 min 10 s)).
  - An action plugin; the printing happens on the controller. Between two progress lines the waiting is one round
    trip, a shell loop on the node that checks the job's results file every O(poll) seconds (no Python started
    there), and M(ansible.builtin.async_status) runs only once that file has changed.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
  - dgx_spark.glm53.attributes.action
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  jid:
    description: The async job id (C(ansible_job_id) of the registered async task).
    type: str
    required: true
  progress_file:
    description: Path of the job's progress file on the node; empty prints elapsed time only.
    type: str
    default: ""
  log_file:
    description: A text log on the node whose last line each progress line shows (read with C(tail -n 1)).
    type: str
    default: ""
  label:
    description: What the job is, for the progress lines.
    type: str
    default: job
  interval:
    description: Seconds between progress lines.
    type: int
    default: 10
  poll:
    description: Seconds between two looks at the job's results file on the node (how soon its end is noticed).
    type: float
    default: 1.0
  timeout:
    description: Seconds to wait before failing; the job itself keeps its own C(async) limit.
    type: int
    default: 14400
attributes:
  check_mode:
    support: full
    details: Waits the same in check mode; whether the job changed anything is the job's own report.
  diff_mode:
    support: none
notes:
  - Start the job with C(changed_when=false) on the async task; its own result, returned here, says whether it changed anything.
"""

EXAMPLES = r"""
- name: Start the download in the background
  dgx_spark.glm53.hf_snapshot:
    repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
    revision: 5ab363a8dcf6405955fd5f99671e01a1c9fb124b
    progress_file: ~/.cache/dgx_spark.glm53/progress-weights.json
  async: 14400
  poll: 0
  changed_when: false
  register: job

- name: Wait for it, printing progress every 10 s
  dgx_spark.glm53.async_progress:
    jid: "{{ job.ansible_job_id }}"
    progress_file: ~/.cache/dgx_spark.glm53/progress-weights.json
    label: weights
  register: fetched
"""

RETURN = r"""
elapsed:
  description: Seconds the job took as seen from the controller, unless the job returns its own.
  returned: always
  type: float
  sample: 73.4
msg:
  description: The job's message, or why waiting failed.
  returned: when the job or the wait failed
  type: str
  sample: weights on spark-head did not finish within 4 h 00 min (async job 123.456 is still running on the node)
"""
