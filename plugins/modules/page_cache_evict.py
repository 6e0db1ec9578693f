#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: page_cache_evict
short_description: Evict files from the Linux page cache and measure what really left
version_added: 0.1.0
description:
  - Drops the page-cache pages of the given files and directories, and reports how many
    bytes of those files were resident before and after, measured by the kernel (C(cachestat)
    where the kernel has it, Linux 6.5 and later, else C(mincore) over a mapping of the file), plus
    C(MemFree), C(MemAvailable) and C(Cached) from C(/proc/meminfo).
  - On DGX Spark (GB10) memory is unified, so the page cache competes with the GPU. The
    serving engine counts free memory, not available memory, when it decides how many
    batch slots fit at load time; a node that has just copied or read model weights boots
    with fewer slots unless that cache is evicted first.
  - Each real file is evicted once, however it is reached (symlinks, hard links, repeated
    or nested paths), by device and inode.
  - A directory reached while walking, through a symlink or as a mount point, is walked only
    if it lies inside O(paths) (resolved) and on the file system of the path it was reached
    from (see O(cross_filesystems)). A link to C(/) or C(/usr) inside a cache is listed in
    RV(skipped_paths), not walked.
  - Nothing is skipped silently. Files that cannot be opened or measured, links that are
    not followed, vanished files and non-regular files are listed in RV(skipped_paths); files
    under O(min_size) are counted in RV(below_min_size); files evicted whose residency the
    kernel will not show are counted in RV(unmeasured).
attributes:
  check_mode:
    support: full
    details:
      - Measures what is resident and reports whether it would be evicted; evicts nothing.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: partial
    details:
      - With O(paths), a second run finds nothing resident and reports no change, unless
        something read the files in between or a process keeps them mapped.
      - Files in RV(unmeasured) are advised on every run and always report a change.
      - Without O(paths) (O(method=drop_caches) or O(method=balloon)), C(Cached) usually
        still goes down a little on the second run, which reports a change.
  action_group:
    description: Use C(group/dgx_spark.glm53.glm53) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - dgx_spark.glm53.glm53
options:
  paths:
    description:
      - Files and directories whose cached pages to evict. Directories are walked recursively.
      - C(~) and environment variables are expanded on the target.
      - Required for O(method=fadvise). Optional for O(method=drop_caches) and
        O(method=balloon), which act on the whole system; when given, residency and
        C(changed) are measured on these files.
    type: list
    elements: path
  follow_symlinks:
    description:
      - Follow symlinks met while walking directories.
      - A link to a file is followed wherever it leads. A Hugging Face snapshot directory
        holds only links to files in C(blobs/), which hold the bytes.
      - A link to a directory is followed only if the directory lies inside one of O(paths)
        (both resolved), so a link to C(/) or C(/usr) in a cache is not walked; it is listed
        in RV(skipped_paths).
      - Paths named in O(paths) are always resolved, whatever this says.
      - With V(false), links met while walking are listed in RV(skipped_paths).
    type: bool
    default: true
  cross_filesystems:
    description:
      - Walk directories on another file system than the path in O(paths) they were reached
        from, that is mount points under it and directory symlinks into such a mount.
      - With V(false), such directories are listed in RV(skipped_paths). A path named in
        O(paths) is walked whatever file system it is on.
    type: bool
    default: false
  min_size:
    description:
      - Leave files smaller than this many bytes alone. They are counted in RV(below_min_size).
      - The default V(0) evicts every file; small files add up on a model cache. Negative values are refused.
    type: int
    default: 0
  method:
    description: How to evict.
    type: str
    default: fadvise
    choices:
      fadvise: >-
        C(posix_fadvise) with C(POSIX_FADV_DONTNEED) on each file, opened read-only: works for
        any file the user can read, needs no root. Dirty pages are written back
        (C(fdatasync)) and the advice repeated. Pages that a running process has mapped stay.
      drop_caches: >-
        C(sync), then write V(1) to C(/proc/sys/vm/drop_caches): drops all clean page cache
        on the host. Needs root (C(become=true)); refused otherwise.
      balloon: >-
        A child process allocates anonymous memory in 64 MiB chunks, each backed at once by the
        kernel (C(MAP_POPULATE); written page by page where that falls short), until
        C(MemAvailable) falls to O(keep_gib), then exits and frees it, so the kernel reclaims
        clean page cache of any owner (root-owned Docker layers included) without root. It looks
        at C(MemAvailable) before every chunk and stops at that floor, even if something else takes
        memory meanwhile. It sets its own C(oom_score_adj) to V(1000), so should memory run out
        anyway the OOM killer takes the balloon, never sshd, dockerd or the engine; the task then
        warns and carries on. Run it only while no model is loaded.
  keep_gib:
    description:
      - For O(method=balloon), the GiB of C(MemAvailable) to leave untouched. Values under
        V(2) (or under an eighth of C(MemTotal) on a machine of less than 16 GiB) are refused.
        Not used by the other methods.
      - Must be a finite number whatever the method (V(nan) and V(inf) are refused).
    type: float
    default: 6.0
  free_target_gib:
    description:
      - For O(method=balloon) only, the C(MemFree) in GiB to reach, for example what an engine's memory
        gate waits for. The balloon then grows only until C(MemFree) plus the balloon reaches it (what
        C(MemFree) will be once the balloon is freed), or C(MemAvailable) is down to O(keep_gib), whichever
        comes first; RV(free_target) says whether it was reached.
      - With that much C(MemFree) already, nothing is done and the task reports no change.
      - Without it, the balloon grows until C(MemAvailable) is down to O(keep_gib).
      - Must be a positive finite number.
    type: float
  missing:
    description:
      - What to do when a path in O(paths) does not exist.
      - V(fail) fails before evicting anything, naming every missing path.
      - V(ignore) lists them in RV(skipped_paths) with reason C(missing) and carries on.
    type: str
    default: fail
    choices: [fail, ignore]
requirements:
  - Linux (C(posix_fadvise), C(mincore) or C(cachestat), C(/proc/meminfo)).
notes:
  - Only clean, unmapped pages can be evicted. RV(resident_bytes_after) shows what stayed,
    for example weights a running engine has mapped.
  - Files on tmpfs or ramfs live in the page cache and cannot be evicted this way.
  - The kernel shows a file's page cache (through C(mincore) since Linux 5.2, and through
    C(cachestat)) only to its owner, to a user who may write it, or to root. Other readable files are still evicted with O(method=fadvise)
    but not measured; they are counted in RV(unmeasured), and C(changed) is true whenever
    there are any.
  - O(method=balloon) may push other processes' memory to swap on a host that has swap.
  - Bad values (a negative O(min_size), a non-finite O(keep_gib), an empty entry in O(paths))
    fail the task before anything is measured or evicted, naming the option.
  - For O(method=drop_caches) and O(method=balloon) without O(paths), C(changed) means
    C(Cached) went down (or, in check mode, that there is cache to drop).
seealso:
  - name: posix_fadvise(2)
    description: The advice O(method=fadvise) gives, and its limits.
    link: https://man7.org/linux/man-pages/man2/posix_fadvise.2.html
  - name: cachestat(2)
    description: How residency is measured on Linux 6.5 and later.
    link: https://man7.org/linux/man-pages/man2/cachestat.2.html
  - name: mincore(2)
    description: How residency is measured on older kernels.
    link: https://man7.org/linux/man-pages/man2/mincore.2.html
  - name: Documentation for /proc/sys/vm/drop_caches
    description: What O(method=drop_caches) writes.
    link: https://docs.kernel.org/admin-guide/sysctl/vm.html#drop-caches
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
---
- name: Evict the Hugging Face cache and the models directory before starting the engine
  dgx_spark.glm53.page_cache_evict:
    paths:
      - ~/.cache/huggingface
      - ~/models
  register: __glm53_evict

- name: Show what left the cache
  ansible.builtin.debug:
    msg: >-
      {{ __glm53_evict.evicted_bytes | human_readable }} evicted,
      {{ __glm53_evict.resident_bytes_after | human_readable }} still resident,
      MemFree {{ __glm53_evict.memory_after.mem_free | human_readable }}

- name: Only large files, and a cache directory that may not exist yet
  dgx_spark.glm53.page_cache_evict:
    paths:
      - ~/.cache/glm53-tf/prepared
    min_size: 16777216
    missing: ignore

- name: Report what is resident, evicting nothing
  dgx_spark.glm53.page_cache_evict:
    paths:
      - ~/.cache/huggingface
  check_mode: true

- name: Drop the whole page cache (root-owned Docker layers too)
  dgx_spark.glm53.page_cache_evict:
    method: drop_caches
  become: true

- name: Without root, make 108 GiB of MemFree for an engine's memory gate (what fadvise cannot name too)
  dgx_spark.glm53.page_cache_evict:
    method: balloon
    free_target_gib: 108
  register: __glm53_balloon
  failed_when: not __glm53_balloon.free_target.reached

- name: Without root, squeeze the page cache out with a balloon, keeping 8 GiB available
  dgx_spark.glm53.page_cache_evict:
    method: balloon
    keep_gib: 8
    paths:
      - ~/models
"""

RETURN = r"""
method:
  description: The method used.
  returned: always
  type: str
  sample: fadvise
file_count:
  description: Distinct files (by device and inode) that were measured, and evicted unless in check mode.
  returned: always
  type: int
  sample: 57
file_bytes:
  description: Total size of those files.
  returned: always
  type: int
  sample: 61203283968
resident_bytes_before:
  description:
    - Page-cache memory those files held before eviction, in whole pages (as C(fincore) and
      C(vmtouch) count it), measured as RV(measured_with) says.
    - In check mode, what would be evicted.
  returned: always
  type: int
  sample: 61203283968
resident_bytes_after:
  description: Bytes of those files still in the page cache afterwards. Equals RV(resident_bytes_before) in check mode.
  returned: always
  type: int
  sample: 0
evicted_bytes:
  description: RV(resident_bytes_before) minus RV(resident_bytes_after), never negative. V(0) in check mode.
  returned: always
  type: int
  sample: 61203283968
measured_with:
  description:
    - The kernel interface that measured residency. V(cachestat) (Linux 6.5+) counts a file's
      cached pages in one call; V(mincore) maps the file and asks page by page, which is
      slower on a warm file. Both report the same pages.
  returned: always
  type: str
  sample: cachestat
unmeasured:
  description:
    - Files handled (and, with O(method=fadvise), evicted) whose residency the kernel does not
      show to this user, because another user owns them and this one may not write them.
      They are in RV(file_count) and RV(file_bytes) but not in the resident figures.
  returned: always
  type: dict
  contains:
    files:
      description: How many.
      type: int
      sample: 0
    bytes:
      description: Their total size.
      type: int
      sample: 0
memory_before:
  description: C(/proc/meminfo) figures before eviction, in bytes.
  returned: always
  type: dict
  contains:
    mem_total:
      description: C(MemTotal).
      type: int
      sample: 128157057024
    mem_free:
      description: C(MemFree). On GB10 this is what the GPU sees as free.
      type: int
      sample: 52613349376
    mem_available:
      description: C(MemAvailable).
      type: int
      sample: 118111600640
    cached:
      description: C(Cached).
      type: int
      sample: 64424509440
memory_after:
  description: The same figures after eviction.
  returned: always
  type: dict
  contains:
    mem_total:
      description: C(MemTotal).
      type: int
      sample: 128157057024
    mem_free:
      description: C(MemFree).
      type: int
      sample: 113816633344
    mem_available:
      description: C(MemAvailable).
      type: int
      sample: 118648471552
    cached:
      description: C(Cached).
      type: int
      sample: 3221225472
skipped_paths:
  description:
    - Paths left alone, each with the reason.
    - >-
      Reasons: V(missing) (with O(missing=ignore)), V(vanished), C(unreadable: <error>),
      C(unreadable directory: <error>), V(broken symlink),
      V(symlink not followed: follow_symlinks is false),
      C(symlink to a directory outside paths: <resolved directory>),
      V(on another file system: cross_filesystems is false), V(not a regular file),
      V(replaced while running) and C(cannot measure residency: <error>).
  returned: always
  type: list
  elements: dict
  sample:
    - path: /home/ops/.cache/huggingface/token.lock
      reason: "unreadable: Permission denied"
    - path: /home/ops/models/old
      reason: missing
duplicates:
  description: Times a file already counted was reached again (symlink, hard link or repeated path).
  returned: always
  type: int
  sample: 57
below_min_size:
  description: Files under O(min_size), left alone.
  returned: always
  type: dict
  contains:
    files:
      description: How many.
      type: int
      sample: 212
    bytes:
      description: Their total size.
      type: int
      sample: 48234496
balloon_bytes:
  description:
    - Anonymous memory the balloon touched before freeing it. V(0) in check mode.
    - If the OOM killer took the balloon, what it had touched by then; the task warns.
  returned: when O(method=balloon)
  type: int
  sample: 107374182400
free_target:
  description: With O(free_target_gib), the target and whether the balloon reached it.
  returned: when O(free_target_gib) is given
  type: dict
  contains:
    bytes:
      description: O(free_target_gib) in bytes.
      type: int
      sample: 115964116992
    expected_free:
      description:
        - C(MemFree) plus the balloon at its last reading, which is what C(MemFree) is once the balloon
          is freed unless something else takes memory meanwhile; C(MemFree) itself when the target
          was met before. V(null) when nothing was measured (check mode with the target not met).
      type: int
      sample: 116232552448
    reached:
      description: RV(free_target.expected_free) is at least RV(free_target.bytes).
      type: bool
      sample: true
elapsed:
  description: Seconds the module took, walking and measuring included.
  returned: always
  type: float
  sample: 1.284
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._module_exit import finish
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache import (
    METHODS,
    evict,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_errors import (
    PageCacheError,
)


ARGUMENT_SPEC = dict(
    paths=dict(type="list", elements="path"),
    follow_symlinks=dict(type="bool", default=True),
    cross_filesystems=dict(type="bool", default=False),
    min_size=dict(type="int", default=0),
    method=dict(type="str", default="fadvise", choices=list(METHODS)),
    keep_gib=dict(type="float", default=6.0),
    free_target_gib=dict(type="float"),
    missing=dict(type="str", default="fail", choices=["fail", "ignore"]),
)
REQUIRED_IF = [("method", "fadvise", ["paths"])]


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF, supports_check_mode=True)
    params = module.params
    finish(module, lambda: evict(
        paths=params["paths"],
        method=params["method"],
        follow_symlinks=params["follow_symlinks"],
        cross_filesystems=params["cross_filesystems"],
        min_size=params["min_size"],
        keep_gib=params["keep_gib"],
        free_target_gib=params["free_target_gib"],
        missing=params["missing"],
        check_mode=module.check_mode,
    ), PageCacheError)


if __name__ == "__main__":
    main()
