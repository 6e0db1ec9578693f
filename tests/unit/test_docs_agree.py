"""The collection's documentation and metadata name every module: README's module table,
meta/runtime.yml's action group (what `module_defaults: {group/dgx_spark.glm53.glm53: ...}`
reaches) and each module's version_added, which must be galaxy.yml's version (nothing is
released yet, so every module is new in it). A module added without them fails here."""

import ast
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODULES_DIR = os.path.join(ROOT, "plugins", "modules")
GROUP = "glm53"
# A row of README's module table: | `dgx_spark.glm53.<name>` | what it does |
ROW = re.compile(r"^\|\s*`dgx_spark\.glm53\.([a-z0-9_]+)`\s*\|")


def read(*path):
    with open(os.path.join(ROOT, *path)) as handle:
        return handle.read()


def modules():
    return sorted(name[:-3] for name in os.listdir(MODULES_DIR)
                  if name.endswith(".py") and not name.startswith("_"))


def documentation(module):
    """The module's DOCUMENTATION, parsed without importing the module."""
    tree = ast.parse(read("plugins", "modules", module + ".py"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(node.value.value)
    raise AssertionError("plugins/modules/%s.py has no DOCUMENTATION" % module)


def readme_modules(text):
    """Module names in the table of README's "## Modules" section, in order."""
    match = re.search(r"^## Modules\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Modules' section before another '## ' heading"
    return [m.group(1) for m in (ROW.match(line) for line in match.group(1).splitlines()) if m]


def version_added_everywhere(doc, where):
    """(where, version) for the module and each option (suboptions too) that says version_added."""
    out = []
    if "version_added" in doc:
        out.append((where, str(doc["version_added"])))
    for name, option in (doc.get("options") or doc.get("suboptions") or {}).items():
        out += version_added_everywhere(option or {}, "%s option %s" % (where, name))
    return out


def test_there_are_modules_to_check():
    # Guards the checks below against passing on an empty list (a moved plugins/modules).
    assert len(modules()) >= 10, modules()


def test_readme_module_table_lists_every_module_and_only_those():
    listed = readme_modules(read("README.md"))
    missing = [m for m in modules() if m not in listed]
    assert missing == [], "README.md's module table lacks %s; add a row for each" % ", ".join(missing)
    unknown = sorted(set(listed) - set(modules()))
    assert unknown == [], "README.md's module table names %s, not in plugins/modules" % ", ".join(unknown)
    duplicated = sorted(set(m for m in listed if listed.count(m) > 1))
    assert duplicated == [], "README.md's module table lists %s twice" % ", ".join(duplicated)


def test_runtime_action_group_holds_every_module():
    runtime = yaml.safe_load(read("meta", "runtime.yml"))
    group = (runtime.get("action_groups") or {}).get(GROUP) or []
    short = [name.rsplit(".", 1)[-1] for name in group if isinstance(name, str)]
    missing = [m for m in modules() if m not in short]
    assert missing == [], "meta/runtime.yml action_groups.%s lacks %s" % (GROUP, ", ".join(missing))
    unknown = sorted(set(short) - set(modules()))
    assert unknown == [], "meta/runtime.yml action_groups.%s names %s, not in plugins/modules" % (GROUP, ", ".join(unknown))


@pytest.mark.parametrize("module", modules())
def test_version_added_is_the_galaxy_version(module):
    version = str(yaml.safe_load(read("galaxy.yml"))["version"])
    doc = documentation(module)
    assert "version_added" in doc, "plugins/modules/%s.py: DOCUMENTATION has no version_added" % module
    wrong = [(where, found) for where, found in version_added_everywhere(doc, module) if found != version]
    assert wrong == [], "version_added must be galaxy.yml's version %s (nothing is released yet); found %s" % (
        version, ", ".join("%s: %s" % pair for pair in wrong))


# The checks above must fail on the mistakes they exist for.
def test_readme_parser_finds_rows_and_stops_at_the_next_section():
    text = ("## Modules\n\n| Module | What |\n|---|---|\n| `dgx_spark.glm53.a_b` | x |\n"
            "| `dgx_spark.glm53.c` | y |\n\n## Layout\n| `dgx_spark.glm53.d` | z |\n")
    assert readme_modules(text) == ["a_b", "c"]


def test_version_added_of_an_option_is_checked_too():
    doc = {"version_added": "0.1.0", "options": {"x": {"version_added": "0.2.0", "suboptions": {"y": {}}}}}
    assert version_added_everywhere(doc, "m") == [("m", "0.1.0"), ("m option x", "0.2.0")]
