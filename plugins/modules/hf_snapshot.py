#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_snapshot
short_description: Download and verify one pinned revision of a Hugging Face model repo in the hub cache
version_added: 0.1.0
description:
  - Makes O(repo_id) at the commit O(revision) complete in the Hugging Face cache under O(cache_dir), in the
    layout C(huggingface_hub) itself writes and reads (C(<cache_dir>/hub/models--org--name/blobs),
    C(snapshots/<sha>)), so the serving kit finds it at C(<cache_dir>/hub/models--org--name/snapshots/<sha>)
    (RV(path)).
  - The first run asks the hub for the file list of the revision (sizes and LFS sha256) with C(model_info),
    selects files with O(allow_patterns) and O(ignore_patterns), verifies what is already on disk and fetches
    the rest with C(hf_hub_download) on O(max_workers) threads. Once every listed file verifies it writes a
    manifest, C(<cache_dir>/hub/models--org--name/.glm53/<sha>.json).
  - A later run with the same patterns reads the file list from the manifest and makes no network call when
    every file verifies. The manifest is not trusted blindly; files that no longer verify are fetched again
    (or, with O(offline=true), listed in the failure).
  - A file that fails verification (short, wrong hash, not a regular file) is never trusted; its snapshot
    link and its blob are removed, then it is fetched again (RV(repaired)).
  - huggingface_hub resumes an interrupted transfer within a run (HTTP Range, a few attempts), but discards
    the partial file once it gives up. A failed run keeps every file already fetched, so a rerun fetches only
    the rest, starting an interrupted file over.
  - A killed run leaves the client's temporary files (C(blobs/<hash>.<id>.incomplete)), which no later download
    reuses. Unless O(offline=true), every run removes those that no process has open (nor the client's lock of
    their blob), before the space check (RV(removed_partials)).
  - The client runs with C(HF_HUB_DISABLE_SHARED_BLOBS=1). C(huggingface_hub) 2.4 otherwise moves every Xet
    download into a store shared by all cached repos (C(<cache_dir>/hub/blobs/<xx>/<hash>)) and makes the repo's
    C(blobs/<hash>) a link to it; when that file is refetched, the client links the store entry again after
    checking only its size, so a corrupt entry of the right size would never be repaired, and a copy of the cache
    would carry links to bytes left behind. Every blob this module fetches is a regular file of the repo.
  - A cache an earlier download left in the shared layout still verifies (links inside the cache are followed).
    A file whose store entry fails verification is fetched into the repo's own C(blobs/); the store entry stays for
    other repos that may link it, with a warning naming it.
  - The token (O(token)) never appears in the results, messages or files this module writes.
attributes:
  check_mode:
    support: full
    details:
      - Verifies what is on disk and reports in RV(missing) and RV(missing_bytes) what would be fetched; fetches,
        removes and writes nothing.
      - Without a manifest, asks the hub for the file list (one request); with one, uses no network.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
    details:
      - The second run finds the manifest and every file verifying; it makes no network call.
  action_group:
    description: Use C(group/dgx_spark.glm53.glm53) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - dgx_spark.glm53.glm53
options:
  repo_id:
    description: The model repo on the hub, C(org/name).
    type: str
    required: true
  revision:
    description:
      - The full 40-hex commit sha to fetch. Branch and tag names (V(main) included) and short shas are refused
        before any network call, since what they name changes.
    type: str
    required: true
  cache_dir:
    description:
      - The Hugging Face cache root (what C(HF_HOME) usually is); the snapshot goes under C(<cache_dir>/hub).
      - C(~) is expanded on the target. C(HF_HOME) and C(HF_HUB_CACHE) in the environment do not change it.
    type: path
    default: ~/.cache/huggingface
  allow_patterns:
    description:
      - Only files matching at least one of these shell patterns, with C(huggingface_hub)'s own semantics
        (C(filter_repo_objects); a pattern ending in C(/) matches a whole folder).
      - Omitted or empty, every file of the revision.
    type: list
    elements: str
  ignore_patterns:
    description: Leave out files matching any of these patterns (same semantics as O(allow_patterns)).
    type: list
    elements: str
  token:
    description:
      - Hugging Face access token, for gated or private repos. Without it the client's own token is used when it
        has one (C(HF_TOKEN), or C(hf auth login) under C(HF_HOME)).
    type: str
  endpoint:
    description:
      - Hub base URL, for a mirror or the lab hub. Omitted, the client's default (C(HF_ENDPOINT), else
        U(https://huggingface.co)).
    type: str
  max_workers:
    description: Files fetched (and, with O(verify=sha256), hashed) at once.
    type: int
    default: 8
  verify:
    description: How to verify each listed file.
    type: str
    default: size
    choices:
      size: >-
        The file exists as C(snapshots/<sha>/<name>), resolves to a regular file and has the listed size.
      sha256: >-
        V(size), plus the SHA-256 of every LFS file (read in 8 MiB chunks) against the hub's, and the git blob
        sha1 of every other file. Reads every byte: minutes on a full checkpoint.
  offline:
    description:
      - Only verify; never download, make no network call, and do not import huggingface_hub.
      - Needs the manifest (written here by an earlier run, or copied from the head together with the
        snapshot and its blobs); fails without one, and fails listing every file that does not verify.
    type: bool
    default: false
  progress_file:
    description:
      - While the module hashes or fetches, a background thread rewrites this JSON file (atomically, about once
        a second) with C(phase), C(bytes_done), C(bytes_total), C(files_done), C(files_total), C(rate_bps),
        C(eta_s) and C(updated) (epoch seconds), measured from the blobs on disk (huggingface_hub writes a transfer
        in 10 MiB pieces, so bytes grow in such steps) and, for O(verify=sha256), from the bytes hashed.
      - C(rate_bps) is measured over the last 10 seconds; C(rate_bps) and C(eta_s) are V(null) until it can be.
      - Phases are V(listing), V(verifying), V(fetching), V(checking), then V(done) or V(failed).
    type: path
  timeout:
    description: Seconds each request to the hub may wait for an answer or for more data.
    type: int
    default: 60
requirements:
  - C(huggingface_hub) 2.4 in the Python that runs the module, unless O(offline=true) or the manifest is
    present and every file verifies. The C(dgx_spark.glm53.hf_weights) role creates a virtualenv with it.
notes:
  - Bad inputs fail before any network call, naming the value.
  - Hub answers become messages naming the input to fix (O(repo_id), O(revision), O(token)); a full disk fails
    before fetching when the free space is less than what is missing, naming the path and both figures.
  - The manifest lives beside C(snapshots/) because C(huggingface_hub)'s C(scan_cache_dir) reports any file
    inside a snapshot that is not a link into C(blobs/) as corruption.
seealso:
  - name: Hugging Face cache layout
    description: The C(blobs), C(snapshots) and C(refs) folders this module fills.
    link: https://huggingface.co/docs/huggingface_hub/guides/manage-cache
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
---
- name: Fetch the pinned TensorFold weights into the deploy user's HF cache
  dgx_spark.glm53.hf_snapshot:
    repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
    revision: 5ab363a8dcf6405955fd5f99671e01a1c9fb124b
    progress_file: ~/.cache/glm53-tf/hf_snapshot.progress.json
  register: __glm53_weights

- name: Show where the kit finds them
  ansible.builtin.debug:
    msg: "{{ __glm53_weights.path }}: {{ __glm53_weights.files }} files, {{ __glm53_weights.bytes | human_readable }}"

- name: Only the safetensors and the JSON files, hashing every LFS file
  dgx_spark.glm53.hf_snapshot:
    repo_id: incoai/GLM-5.3-Flash-DFlash2
    revision: 7d74cdd881ed7e32c31175984a67823127b66cfe
    allow_patterns: ["*.safetensors", "*.json"]
    verify: sha256
    token: "{{ hf_weights_token }}"

- name: On a worker that got the snapshot and its manifest copied from the head, verify without network
  dgx_spark.glm53.hf_snapshot:
    repo_id: LibertAIDAI/GLM-5.3-Flash-NVFP4
    revision: 9e0d74e3cef17f634e84fb8e2223707e02616290
    cache_dir: /data/hf
    offline: true

- name: What would be fetched
  dgx_spark.glm53.hf_snapshot:
    repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
    revision: 5ab363a8dcf6405955fd5f99671e01a1c9fb124b
  check_mode: true
"""

RETURN = r"""
path:
  description: The snapshot folder, C(<cache_dir>/hub/models--org--name/snapshots/<sha>).
  returned: always
  type: str
  sample: /home/spark/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/snapshots/5ab363a8dcf6405955fd5f99671e01a1c9fb124b
files:
  description: Files of the revision the patterns select.
  returned: always
  type: int
  sample: 42
bytes:
  description: Their total size.
  returned: always
  type: int
  sample: 165325838336
downloaded_bytes:
  description: Bytes of the files fetched from the hub in this run. V(0) in check mode.
  returned: always
  type: int
  sample: 4294967296
missing:
  description:
    - Files that were missing, short or corrupt before the run (and fetched, unless the run failed).
    - In check mode, the files that would be fetched.
  returned: always
  type: list
  elements: str
  sample: [model-00007-of-00042.safetensors]
missing_bytes:
  description: Total size of RV(missing).
  returned: always
  type: int
  sample: 4294967296
removed_partials:
  description:
    - Temporary files of the client (C(<hash>.<id>.incomplete) under C(blobs/)) that no process had open, removed
      before the space check. In check mode, the ones that would be. Always empty with O(offline=true).
  returned: always
  type: list
  elements: str
  sample: [0c8d9c2e4b1f7a6d5e3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e.5f2a9c1d.incomplete]
removed_partial_bytes:
  description: Total size of RV(removed_partials).
  returned: always
  type: int
  sample: 2147483648
repaired:
  description:
    - Files of RV(missing) that were present but failed verification; removed and fetched again.
    - In check mode, the ones that would be.
  returned: always
  type: list
  elements: str
  sample: []
verified:
  description:
    - Every listed file verified (as O(verify) says) at the end of the run. In check mode, before it.
    - After a real run with V(true), the manifest RV(manifest) exists.
  returned: always
  type: bool
  sample: true
manifest:
  description: The manifest's path (written only once every file verified).
  returned: always
  type: str
  sample: /home/spark/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/.glm53/5ab363a8dcf6405955fd5f99671e01a1c9fb124b.json
elapsed:
  description: Seconds the module took.
  returned: always
  type: float
  sample: 612.4
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_manifest import VERIFY_MODES
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_snapshot import SnapshotError, sync
from ansible_collections.dgx_spark.glm53.plugins.module_utils._module_exit import finish

ARGUMENT_SPEC = dict(
    repo_id=dict(type="str", required=True),
    revision=dict(type="str", required=True),
    cache_dir=dict(type="path", default="~/.cache/huggingface"),
    allow_patterns=dict(type="list", elements="str"),
    ignore_patterns=dict(type="list", elements="str"),
    token=dict(type="str", no_log=True),
    endpoint=dict(type="str"),
    max_workers=dict(type="int", default=8),
    verify=dict(type="str", default="size", choices=list(VERIFY_MODES)),
    offline=dict(type="bool", default=False),
    progress_file=dict(type="path"),
    timeout=dict(type="int", default=60),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, lambda: sync(dict(module.params), check_mode=module.check_mode), SnapshotError)


if __name__ == "__main__":
    main()
