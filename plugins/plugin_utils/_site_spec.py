# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site contract (``meta/site_argument_spec.yml``) as the controller reads it: the
default of each ``glm53_*`` site variable, the type errors Ansible's own validation lets
through, and README.md's "Site variables" table. Not a public API.

``python -m ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec --readme README.md``
rewrites the table (``make site-vars``); with ``--check`` it only says whether it is stale.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import copy
import json
import os
import sys

import yaml

from ansible.module_utils.common.collections import is_sequence

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._api_endpoint import (
    BIND_VAR,
    PORT_VAR,
    bind_problem,
    port_problem,
)

SPEC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "meta", "site_argument_spec.yml")
SPEC_NAME = "site"
BEGIN = "<!-- site-vars: begin (generated from meta/site_argument_spec.yml by `make site-vars`; do not edit) -->"
END = "<!-- site-vars: end -->"

_CACHE = {}

# Site values whose meaning no type says (an address literal, a port range): their own check,
# the one the tensorfold role runs too, in place of the type check.
VALUE_CHECKS = {BIND_VAR: bind_problem, PORT_VAR: port_problem}


def load(path=SPEC_PATH):
    """The spec's ``argument_specs.site`` mapping (read once per process and path). libyaml's
    parser where PyYAML has it: the pure-Python one took 10 ms of CPU per read."""
    key = os.path.abspath(path)
    if key not in _CACHE:
        with open(key) as handle:
            _CACHE[key] = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))[
                "argument_specs"][SPEC_NAME]
    return _CACHE[key]


def options(path=SPEC_PATH):
    return load(path)["options"]


def site_default(name, path=SPEC_PATH):
    """A deep copy of the named site variable's default (callers may not mutate the shared one)."""
    known = options(path)
    if name not in known:
        raise KeyError("no site variable named %r in meta/site_argument_spec.yml (known: %s)"
                       % (name, ", ".join(sorted(known))))
    return copy.deepcopy(known[name].get("default"))


def _kind(value):
    """The YAML name of a value's type (Ansible 2.19 hands tagged and lazy subclasses)."""
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return "list" if is_sequence(value) else type(value).__name__


def _found(value):
    shown = json.dumps(value, default=str, sort_keys=True)
    return "%s %s" % (_kind(value), shown if len(shown) <= 80 else shown[:77] + "...")


def _strict(name, value, spec, out, secret=False):
    """Type errors validate_argument_spec converts away: a list, number or bool given for a
    str becomes its repr (``['a']`` as a netdev name), a ``k=v`` string becomes a dict."""
    wanted = spec.get("type", "str")
    shown = "%s (value hidden)" % _kind(value) if secret else _found(value)
    if value is None:
        return
    if wanted == "str" and not isinstance(value, str):
        out.append("%s: expected a string, found %s" % (name, shown))
    elif wanted == "dict":
        if not isinstance(value, dict):
            out.append("%s: expected a mapping, found %s" % (name, shown))
        elif spec.get("options"):
            for key in sorted(value):
                if key in spec["options"]:
                    _strict("%s.%s" % (name, key), value[key], spec["options"][key], out, secret)
    elif wanted == "list":
        if isinstance(value, str) or not is_sequence(value):
            out.append("%s: expected a list, found %s" % (name, shown))
        elif spec.get("options") and spec.get("elements") == "dict":
            for index, item in enumerate(value):
                _strict("%s[%d]" % (name, index), item, {"type": "dict", "options": spec["options"]}, out, secret)
    elif wanted == "int" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        out.append("%s: expected a whole number of 0 or more, found %s" % (name, shown))
    elif wanted == "bool" and not isinstance(value, bool):
        out.append("%s: expected true or false, found %s" % (name, shown))


def type_errors(values, path=SPEC_PATH):
    """``["glm53_link_netdev: expected a string, found list [...]", ...]`` for the site variables in ``values`` (a
    host's variables) whose type is not the spec's, without converting anything; and for those in VALUE_CHECKS,
    whatever their own check refuses (``glm53_api_port: true`` is an int to Python, but no port)."""
    out = []
    for name, spec in sorted(options(path).items()):
        if name not in values:
            continue
        if name in VALUE_CHECKS:
            problem = VALUE_CHECKS[name](values[name])
            out += [problem] if problem else []
        else:
            _strict(name, values[name], spec, out, secret=bool(spec.get("no_log")))
    return out


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def _plain(text):
    """Ansible doc markup (C(x), V(x), O(x)) as Markdown code."""
    out, i = [], 0
    while i < len(text):
        if text[i] in "CVO" and text[i + 1:i + 2] == "(" and (i == 0 or not text[i - 1].isalnum()):
            end = text.find(")", i + 2)
            if end > 0:
                out.append("`%s`" % text[i + 2:end])
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _type(spec):
    wanted = spec.get("type", "str")
    if spec.get("choices"):
        return "%s: %s" % (wanted, ", ".join("`%s`" % c for c in spec["choices"]))
    return wanted


def _value(value):
    """A default as short Markdown: pins as ``repo@revision``, nested mappings inline."""
    if isinstance(value, dict):
        if "repo_id" in value and "revision" in value:
            notes = (["drafter"] if value.get("drafter") else []) + ([value["license"]] if value.get("license") else [])
            extra = " (%s)" % ", ".join(notes) if notes else ""
            return "`%s@%s`%s" % (value["repo_id"], value["revision"], extra)
        return ", ".join("%s %s" % (key, _value(item)) for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(_value(item) for item in value)
    if value == "":
        return "`''`"
    return "`%s`" % value


def _default(spec):
    value = spec.get("default")
    if isinstance(value, dict):
        return "<br>".join("%s: %s" % (key, _value(item)) for key, item in value.items())
    return _value(value)


def render_table(path=SPEC_PATH):
    """README.md's "Site variables" table, in the spec's order."""
    rows = ["| variable | type | default | read by | meaning |", "| --- | --- | --- | --- | --- |"]
    for name, spec in options(path).items():
        rows.append("| `%s` | %s | %s | %s | %s |" % (
            name, _type(spec), _default(spec), ", ".join(spec.get("roles") or []),
            _cell(_plain(spec.get("description", "")))))
    return "\n".join(rows)


def replace_table(readme, table):
    """``readme`` with the text between the markers replaced by ``table``."""
    start, stop = readme.find(BEGIN), readme.find(END)
    if start < 0 or stop < start:
        raise ValueError("README.md lacks the site-vars markers:\n%s\n...\n%s" % (BEGIN, END))
    return readme[:start + len(BEGIN)] + "\n" + table + "\n" + readme[stop:]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Render README.md's site-variables table from the site contract.")
    parser.add_argument("--readme", required=True)
    parser.add_argument("--check", action="store_true", help="only say whether the table is stale (exit 1)")
    args = parser.parse_args(argv)
    with open(args.readme) as handle:
        text = handle.read()
    wanted = replace_table(text, render_table())
    if wanted == text:
        return 0
    if args.check:
        sys.stderr.write("%s: the site-variables table is stale; run `make site-vars`\n" % args.readme)
        return 1
    with open(args.readme, "w") as handle:
        handle.write(wanted)
    sys.stdout.write("%s: site-variables table rewritten\n" % args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
