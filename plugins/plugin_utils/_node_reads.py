# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One read of a node for a path role: everything its later steps judge from (git trees, files,
``docker ... inspect``) printed by one shell task, so a converged rerun pays one round trip per
node instead of one per value (roles/tensorfold/tasks/install.yml, roles/vllm_nvfp4/tasks/install.yml).

The read prints one ``key=value`` line per key, in order (the values of ``base64_keys`` are file
contents in base64 on one line), then for each section a line ``<section>:`` and that command's
JSON output (empty when Docker has no such object, which reads as ``[]``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import json

# What each role's read prints: (keys, base64 keys, sections). A checkout's <name>_head,
# <name>_url and <name>_clean (printed by checkout_read's shell) say whether its git task has
# anything to do (checkout_current). vllm's cache_dir is the rank cache's path as the node
# expands it, cache_mode its mode (empty: no directory there).
TENSORFOLD = (("kit_head", "kit_url", "kit_clean", "profile_head", "profile_url", "profile_clean", "kit_tree",
               "patches_tree", "example", "started_env", "prod_env"), ("example", "started_env"), ("images",))
VLLM = (("recipe_head", "recipe_url", "recipe_clean", "trees", "base_id", "cache_dir", "cache_mode"), (),
        ("image", "container"))

# Prints <name>_head, <name>_url and <name>_clean of the checkout at $1: clean when nothing
# tracked is modified and every submodule is at its recorded commit (what the git module checks).
_CHECKOUT_SH = """checkout() {
  head='' url='' clean=no
  if [ -e "$1/.git" ] && head=$(git -C "$1" rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null); then
    url=$(git -C "$1" config --get remote.origin.url || true)
    if [ -z "$(git -C "$1" status --porcelain --untracked-files=no)" ] \\
        && ! git -C "$1" submodule status --recursive | grep -qv '^ '; then clean=yes; fi
  else head=''; fi
  printf '%s_head=%s\\n%s_url=%s\\n%s_clean=%s\\n' "$2" "$head" "$2" "$url" "$2" "$clean"
}
"""


def checkout_read(path_sh, name):
    """Shell lines of a read that print checkout ``name``'s three keys; ``path_sh`` is the
    checkout's path already quoted for the shell. An empty ``path_sh`` prints them empty (a
    node that does not hold this checkout)."""
    if not path_sh:
        return "printf '%%s_head=\\n%%s_url=\\n%%s_clean=no\\n' %s %s %s\n" % (name, name, name)
    return _CHECKOUT_SH + "checkout %s %s\n" % (path_sh, name)


def checkout_current(reads, name, commit, repo):
    """Whether the read found checkout ``name`` at ``commit``, cloned from ``repo`` (compared as
    text: the git task would otherwise set the URL), nothing tracked modified (``git status
    --porcelain`` less untracked files, the git module's own test) and every submodule at its
    recorded commit: its git task would change nothing, so a converged rerun leaves it out."""
    return (bool(commit) and reads.get(name + "_head") == str(commit).lower()
            and reads.get(name + "_url") == str(repo) and reads.get(name + "_clean") == "yes")


class ReadsError(ValueError):
    """The read's output is not in the form above."""


def parse_reads(stdout, keys, base64_keys=(), sections=()):
    """``{key: text, ..., section: list, ...}`` from one read's output."""
    lines = str(stdout or "").split("\n")
    out = {}
    for index, key in enumerate(keys):
        line = lines[index] if index < len(lines) else ""
        if not line.startswith(key + "="):
            raise ReadsError("line %d is %r, expected %s=..." % (index + 1, line[:80], key))
        out[key] = line[len(key) + 1:].strip()
    for key in base64_keys:
        try:
            out[key] = base64.b64decode(out[key].encode("ascii"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError, ValueError) as exc:
            raise ReadsError("%s is not base64 of UTF-8 text: %s" % (key, exc))
    rest = lines[len(keys):]
    for number, section in enumerate(sections):
        if not rest or rest[0].strip() != section + ":":
            raise ReadsError("no %s: line after %s" % (section, ", ".join(tuple(keys) + tuple(sections[:number]))))
        rest = rest[1:]
        following = sections[number + 1] + ":" if number + 1 < len(sections) else None
        end = rest.index(following) if following in rest else len(rest)
        text = "\n".join(rest[:end]).strip()
        rest = rest[end:]
        try:
            value = json.loads(text) if text else []
        except ValueError as exc:
            raise ReadsError("the %s output is not JSON: %s" % (section, exc))
        if not isinstance(value, list):
            raise ReadsError("the %s output is a %s, expected a list" % (section, type(value).__name__))
        out[section] = value
    return out


def node_reads(stdout, layout, checkouts=None):
    """:func:`parse_reads` of ``stdout`` in ``layout`` (TENSORFOLD, VLLM), plus for each of
    ``checkouts`` (``{name: {commit, repo}}``: those this node needs) ``<name>_current``."""
    reads = parse_reads(stdout, *layout)
    for name, pin in (checkouts or {}).items():
        reads[name + "_current"] = checkout_current(reads, name, pin.get("commit"), pin.get("repo"))
    return reads
