"""The site contract (meta/site_argument_spec.yml) is the one place each glm53_* site
variable is specified: every one the collection reads is in it, its `roles:` are the roles
that read it, the roles take their defaults only from it (no pins or sizes in Python, no
fallbacks of their own), and README.md's table is rendered from it."""

import os
import re

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _site_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC = os.path.join(ROOT, "meta", "site_argument_spec.yml")
# Every role directory: a new role is checked without anyone remembering to list it here.
ROLES = tuple(sorted(name for name in os.listdir(os.path.join(ROOT, "roles"))
                     if os.path.isdir(os.path.join(ROOT, "roles", name))))
# Facts the roles publish (their contracts): outputs, not site inputs.
FACTS = {"glm53_cluster", "glm53_weights", "glm53_docker_runtime"}
NAME = re.compile(r"(?<![A-Za-z0-9_])glm53_[a-z0-9_]*[a-z0-9]")
# What a role reads of the site: role files that template, and the role's filter plugin.
ROLE_PARTS = ("defaults", "vars", "tasks", "templates", "handlers")


def read(path):
    with open(path) as handle:
        return handle.read()


def files(*tops, exts=(".yml", ".yaml", ".py", ".j2")):
    for top in tops:
        for base, _dirs, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith(exts):
                    yield os.path.join(base, name)


def spec():
    return yaml.safe_load(read(SPEC))["argument_specs"]["site"]["options"]


def python_names():
    """glm53_* names that are Python functions (the filters' implementations), not variables."""
    return {m for path in files("plugins", exts=(".py",)) for m in re.findall(r"def (glm53_[a-z0-9_]+)", read(path))}


def test_every_glm53_variable_the_collection_reads_is_in_the_contract():
    used = {}
    for path in files("roles", "playbooks", "plugins", "inventory.example"):
        for name in NAME.findall(read(path)):
            used.setdefault(name, os.path.relpath(path, ROOT))
    unknown = sorted(set(used) - set(spec()) - FACTS - python_names())
    assert unknown == [], "glm53_* names read but not in meta/site_argument_spec.yml: %s" % ", ".join(
        "%s (%s)" % (name, used[name]) for name in unknown)


def role_reads(role, name):
    paths = [p for part in ROLE_PARTS for p in files(os.path.join("roles", role, part))]
    filter_plugin = os.path.join(ROOT, "plugins", "filter", role + ".py")
    paths += [filter_plugin] if os.path.exists(filter_plugin) else []
    return any(re.search(r"(?<![A-Za-z0-9_])%s(?![a-z0-9_])" % name, read(p)) for p in paths)


@pytest.mark.parametrize("name", sorted(yaml.safe_load(open(SPEC))["argument_specs"]["site"]["options"]))
def test_each_variable_names_exactly_the_roles_that_read_it(name):
    option = spec()[name]
    for key in ("type", "description", "roles"):
        assert key in option, "%s lacks %s in meta/site_argument_spec.yml" % (name, key)
    assert "default" in option, "%s has no default: the roles read theirs from the contract" % name
    readers = [role for role in ROLES if role_reads(role, name)]
    assert sorted(option["roles"]) == readers, "%s: roles says %s, read by %s" % (name, option["roles"], readers)


def test_roles_take_site_defaults_only_from_the_contract():
    # `glm53_x | default(<anything else>)` is a second default the contract does not show.
    fallback = re.compile(r"(?<![A-Za-z0-9_])(glm53_[a-z0-9_]+) \| default\(([^)]*)")
    wrong = []
    for path in files("roles", "playbooks"):
        for name, rest in fallback.findall(read(path)):
            if name not in FACTS and not rest.startswith("'%s' | dgx_spark.glm53.site_default" % name):
                wrong.append("%s: %s | default(%s" % (os.path.relpath(path, ROOT), name, rest))
    assert wrong == []


def test_pins_and_disk_needs_live_only_in_the_contract():
    pin = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"
    # (Module EXAMPLES may show it: documentation, not a default.)
    holders = [os.path.relpath(p, ROOT) for p in files("plugins/plugin_utils", "plugins/filter", "roles", "playbooks")
               if pin in read(p)]
    assert holders == []
    assert spec()["glm53_models"]["default"]["tensorfold"][0]["revision"] == pin
    assert spec()["glm53_disk_need_bytes"]["default"]["tensorfold"]["checkpoint"] == 165000000000


def test_defaults_pass_their_own_spec():
    options = spec()
    result = ArgumentSpecValidator(options).validate({name: o["default"] for name, o in options.items()})
    assert result.error_messages == []
    assert _site_spec.type_errors({name: o["default"] for name, o in options.items()}, SPEC) == []


def test_site_default_returns_independent_copies_and_names_the_known():
    _site_spec.site_default("glm53_disk_need_bytes")["tensorfold"]["checkpoint"] = 1
    assert _site_spec.site_default("glm53_disk_need_bytes")["tensorfold"]["checkpoint"] == 165000000000
    assert _site_spec.site_default("glm53_link_netdev") == "auto"
    with pytest.raises(KeyError, match="known: .*glm53_link_netdev"):
        _site_spec.site_default("glm53_nope")


@pytest.mark.parametrize("values, says", [
    ({"glm53_link_netdev": ["enp1s0f1np1"]}, 'glm53_link_netdev: expected a string, found list ["enp1s0f1np1"]'),
    ({"glm53_link_address": 198}, "glm53_link_address: expected a string, found int 198"),
    ({"glm53_models": "tensorfold=x"}, "glm53_models: expected a mapping, found str"),
    ({"glm53_disk_need_bytes": {"vllm": {"checkpoint": -1}}},
     "glm53_disk_need_bytes.vllm.checkpoint: expected a whole number of 0 or more, found int -1"),
    ({"glm53_models": {"vllm": [{"repo_id": "a/b", "revision": "0" * 40, "drafter": "yes"}]}},
     "glm53_models.vllm[0].drafter: expected true or false, found str"),
    ({"glm53_hf_token": ["hf_secret"]}, "glm53_hf_token: expected a string, found list (value hidden)"),
    # An address and a port range are more than a type: their own checks (plugin_utils/_api_endpoint.py).
    ({"glm53_api_bind": "spark-head"}, 'glm53_api_bind: expected an IPv4 or IPv6 address literal, found str '
                                       '"spark-head" (a host name'),
    ({"glm53_api_port": True}, "glm53_api_port: expected a whole number from 1024 to 65535, found bool true"),
    ({"glm53_api_port": 80}, "glm53_api_port: expected a whole number from 1024 to 65535, found int 80"),
    ({"glm53_api_port": 65536}, "glm53_api_port: expected a whole number from 1024 to 65535, found int 65536"),
])
def test_type_errors_refuse_what_ansible_would_convert(values, says):
    errors = _site_spec.type_errors(values, SPEC)
    assert len(errors) == 1 and errors[0].startswith(says), errors
    assert "hf_secret" not in errors[0]


@pytest.mark.parametrize("values", [{"glm53_api_bind": "10.0.0.5"}, {"glm53_api_bind": "::"},
                                    {"glm53_api_port": 1024}, {"glm53_api_port": 65535}])
def test_api_bind_and_port_in_range_pass(values):
    assert _site_spec.type_errors(values, SPEC) == []


def test_readme_site_table_is_the_rendered_one():
    readme = read(os.path.join(ROOT, "README.md"))
    assert _site_spec.BEGIN in readme and _site_spec.END in readme, "README.md lacks the site-vars markers"
    assert _site_spec.replace_table(readme, _site_spec.render_table(SPEC)) == readme, (
        "README.md's site-variables table is stale: run `make site-vars` and commit README.md")


def test_readme_table_lists_every_variable_in_spec_order():
    readme = read(os.path.join(ROOT, "README.md"))
    table = readme[readme.index(_site_spec.BEGIN):readme.index(_site_spec.END)]
    assert re.findall(r"^\| `(glm53_[a-z0-9_]+)` \|", table, re.M) == list(spec())


def test_check_mode_of_the_generator_fails_on_a_stale_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("x\n%s\n| old |\n%s\ny\n" % (_site_spec.BEGIN, _site_spec.END))
    assert _site_spec.main(["--readme", str(readme), "--check"]) == 1
    assert _site_spec.main(["--readme", str(readme)]) == 0
    assert _site_spec.main(["--readme", str(readme), "--check"]) == 0
    assert "| `glm53_link_netdev` |" in readme.read_text()
