"""dgx_spark.glm53.checkpoint_check run as a real module by ansible-playbook on localhost, on
checkpoints laid out as a Hugging Face hub cache snapshot (relative links into ../../blobs).
One playbook runs every case (a task each, errors ignored), so the module is started once per
case but Ansible only once. The judgments in detail are test__checkpoint.py's."""

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.modules import checkpoint_check
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import (
    META_FILES,
    SHARDS,
    checkpoint_tree,
    entry,
    shell_model_meta,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
NODE = socket.gethostname()
# Keys ansible-core adds to every result, and to any result with an existing `path` (its file
# attributes); not the module's to document.
ANSIBLE_KEYS = {"_ansible_no_log", "action", "invocation", "changed", "failed", "msg", "exception", "warnings",
                "deprecations", "state", "mode", "owner", "group", "uid", "gid", "size", "secontext"}
MISSING = "model-00002-of-00003.safetensors"


def documented():
    return yaml.safe_load(checkpoint_check.RETURN)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """{case: (task result, snapshot dir)} of one playbook run over every case."""
    home = tmp_path_factory.mktemp("home")
    trees = {name: checkpoint_tree(home / name, SHARDS) for name in ("complete", "gap", "bad_index")}
    os.unlink(trees["gap"].blob(entry(trees["gap"], MISSING)))  # a dangling link
    with open(trees["bad_index"].blob(entry(trees["bad_index"], "model.safetensors.index.json")), "w") as handle:
        handle.write('{"weight_map": {"a": "../../blobs/model.safetensors"}}')

    def rel(name):
        return "~/" + os.path.relpath(trees[name].snap, str(home))

    tasks = [
        ("complete", {"path": rel("complete")}, {}),
        ("complete_check", {"path": rel("complete")}, {"check_mode": True}),
        ("gap", {"path": rel("gap")}, {}),
        ("gap_reported", {"path": rel("gap"), "fail_on_missing": False}, {}),
        ("gap_check", {"path": rel("gap")}, {"check_mode": True}),
        ("bad_index", {"path": rel("bad_index"), "fail_on_missing": False}, {}),
        ("absent", {"path": str(home / "absent")}, {}),
    ]
    playbook = home / "play.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"ansible_python_interpreter": sys.executable},
        "tasks": [dict({"name": name, "dgx_spark.glm53.checkpoint_check": args, "ignore_errors": True,
                        "environment": {"HOME": str(home)}}, **extra) for name, args, extra in tasks]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("ansible-playbook printed no JSON (rc %d): %s %s" % (proc.returncode, proc.stdout, proc.stderr))
    results = [task["hosts"]["localhost"] for task in report["plays"][0]["tasks"]]
    assert len(results) == len(tasks), proc.stdout
    snaps = dict((name, trees[name].snap) for name in trees)
    snaps.update(complete_check=snaps["complete"], gap_reported=snaps["gap"], gap_check=snaps["gap"],
                 absent=str(home / "absent"))
    return {name: (result, snaps[name]) for (name, _args, _extra), result in zip(tasks, results)}


def no_traceback(result):
    # The json callback puts "(traceback unavailable)" in every failed result; a real one is a traceback.
    return result.get("exception") in (None, "(traceback unavailable)")


def assert_documented_keys(result):
    assert set(result) - ANSIBLE_KEYS == set(documented()), sorted((set(result) - ANSIBLE_KEYS) ^ set(documented()))


@pytest.mark.parametrize("case", ["complete", "complete_check"])
def test_a_complete_checkpoint_with_the_recipes_model_meta(cases, case):
    result, snap = cases[case]
    assert result.get("failed") is not True, result
    assert result["changed"] is False and result["complete"] is True
    assert (result["path"], result["missing"], result["shards"], result["shard_bytes"]) == (snap, [], 3, 6000)
    # `sha256sum config.json model.safetensors.index.json chat_template.jinja tokenizer_config.json | sha256sum`
    assert result["model_meta"] == shell_model_meta(snap)
    assert sorted(result["meta"]) == sorted(META_FILES)  # a dict: Ansible sorts its keys
    assert_documented_keys(result)


@pytest.mark.parametrize("case", ["gap", "gap_check"])
def test_a_missing_shard_fails_naming_the_node_and_still_returns_the_fields(cases, case):
    result, snap = cases[case]
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == (
        "%s: checkpoint %s is incomplete: missing %s (of 3 shards in model.safetensors.index.json). Fix: rerun the "
        "hf_weights role (playbooks/site.yml does) so the pinned revision is fetched and verified again; nothing "
        "was started." % (NODE, snap, MISSING))
    assert (result["missing"], result["complete"], result["shard_bytes"]) == ([MISSING], False, 4000)
    assert result["model_meta"] == shell_model_meta(snap)
    assert no_traceback(result)
    assert_documented_keys(result)


def test_fail_on_missing_false_reports_the_gap_without_failing(cases):
    result, _snap = cases["gap_reported"]
    assert result.get("failed") is not True, result
    assert (result["complete"], result["missing"], result["changed"]) == (False, [MISSING], False)


def test_a_shard_outside_the_directory_fails_whatever_fail_on_missing(cases):
    result, snap = cases["bad_index"]
    assert result["failed"] is True and no_traceback(result)
    assert result["msg"].startswith("%s: checkpoint index %s/model.safetensors.index.json is not valid: weight_map "
                                    "names the shard '../../blobs/model.safetensors', which is not a plain relative "
                                    "path inside the checkpoint directory" % (NODE, snap))
    assert_documented_keys(result)


def test_a_path_that_does_not_exist_fails_naming_it(cases):
    result, path = cases["absent"]
    assert result["failed"] is True and no_traceback(result)
    assert result["msg"].startswith("%s: checkpoint %s does not exist. Fix: rerun the hf_weights role" % (NODE, path))
    assert result["complete"] is False
