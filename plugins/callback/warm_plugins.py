# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback plugin dgx_spark.glm53.warm_plugins: loads this collection's filter and action
plugins once, in ansible-playbook's main process, before the first task forks a worker, and
keeps the modules' AnsiballZ payloads from one run to the next while their sources are the same."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: warm_plugins
type: aggregate
short_description: Load the collection's filter and action plugins before any worker forks
description:
  - Ansible forks a worker process for every task on every host, and each worker loads the
    Jinja filters a template names. A filter named by its FQCN makes the worker import every
    filter file of its collection to find it (one file holds several filters), which cost about
    0.16 s of CPU per task and host here, four times a plain C(set_fact).
  - At the start of the playbook this callback loads them once in the main process, so every
    worker forked after it finds them already imported.
  - Ansible builds each module's payload (the module and the module_utils it imports, zipped)
    once per run, in the run's own temporary directory, 0.1 to 0.25 s of CPU a module. The
    callback points that cache at a directory kept between runs, one per set of sources;
    its name is a hash of ansible-core's and Python's versions, the modification times and
    sizes of this collection's modules and module_utils, and the manifests of every
    collection on the collection path. A changed module, an upgraded collection or another
    ansible-core gets a directory of its own; the 8 most recently used are kept. Set
    E(GLM53_ANSIBALLZ_CACHE=0) to build every payload again in each run, as Ansible does.
  - It prints nothing and changes no result.
  - Enable it with C(callbacks_enabled = dgx_spark.glm53.warm_plugins) in C(ansible.cfg), as the
    collection's own C(ansible.cfg) does.
requirements:
  - Enabled in C(callbacks_enabled).
"""

import glob
import hashlib
import os
import shutil
import sys

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.release import __version__ as ansible_core_version
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.plugins.loader import action_loader, filter_loader, test_loader
from ansible.utils.display import Display

display = Display()

COLLECTION = "dgx_spark.glm53"
# plugins/callback/ -> the collection's root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEEP = 8


def sources_key(root, collection_paths):
    """A hash of everything a payload is built from, but the modules' contents: ansible-core
    and Python, the module files of the collection at `root` (path, size, mtime), and the
    manifest of every collection under `collection_paths`."""
    digest = hashlib.sha256()
    digest.update(("%s\0%s\0%s\0" % (ansible_core_version, sys.version, sys.executable)).encode())
    for folder in ("modules", "module_utils"):
        for path in sorted(glob.glob(os.path.join(root, "plugins", folder, "**", "*.py"), recursive=True)):
            stat = os.stat(path)
            digest.update(("%s\0%d\0%d\0" % (path, stat.st_size, stat.st_mtime_ns)).encode())
    for base in collection_paths:
        for manifest in sorted(glob.glob(os.path.join(base, "ansible_collections", "*", "*", "MANIFEST.json")) +
                               glob.glob(os.path.join(base, "ansible_collections", "*", "*", "galaxy.yml"))):
            stat = os.stat(manifest)
            digest.update(("%s\0%d\0%d\0" % (manifest, stat.st_size, stat.st_mtime_ns)).encode())
    return digest.hexdigest()[:20]


def keep_payloads():
    """Link this run's payload cache (<local tmp>/ansiballz_cache) to a kept directory for these
    sources; prune all but the KEEP most recently used. Returns the directory, or None."""
    if os.environ.get("GLM53_ANSIBALLZ_CACHE", "1") == "0":
        return None
    run_tmp = C.DEFAULT_LOCAL_TMP
    link = os.path.join(run_tmp, "ansiballz_cache")
    if os.path.lexists(link):  # a worker already made it: leave this run as Ansible has it
        return None
    base = os.path.join(os.path.dirname(run_tmp), "dgx_spark.glm53-ansiballz")
    kept = os.path.join(base, sources_key(ROOT, AnsibleCollectionConfig.collection_paths))
    os.makedirs(kept, mode=0o700, exist_ok=True)
    os.utime(kept)
    os.symlink(kept, link)
    others = sorted((os.path.join(base, name) for name in os.listdir(base)), key=os.path.getmtime, reverse=True)
    for stale in others[KEEP:]:
        shutil.rmtree(stale, ignore_errors=True)
    return kept


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "dgx_spark.glm53.warm_plugins"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._warmed = False

    def _warm(self):
        if self._warmed:
            return
        self._warmed = True
        # Looking up a name that no file defines makes the Jinja loader import every filter (and
        # test) file of the collection, which is the whole point; then it finds none.
        for loader in (filter_loader, test_loader):
            try:
                loader.get_with_context(COLLECTION + "._warm_plugins_")
            except Exception as exc:  # pylint: disable=broad-except
                display.vvv("warm_plugins: %s: %s" % (loader.type, exc))
        # Every action plugin of the collection, as the folder has them (no list to keep in step).
        for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "action", "*.py"))):
            name = os.path.splitext(os.path.basename(path))[0]
            if name.startswith("_"):
                continue
            try:
                action_loader.get_with_context(COLLECTION + "." + name, class_only=True)
            except Exception as exc:  # pylint: disable=broad-except
                display.vvv("warm_plugins: action %s: %s" % (name, exc))

        try:
            kept = keep_payloads()
            if kept:
                display.vvv("warm_plugins: module payloads kept in %s" % kept)
        except OSError as exc:
            display.vvv("warm_plugins: module payloads not kept: %s" % exc)

    def v2_playbook_on_start(self, playbook):
        self._warm()
