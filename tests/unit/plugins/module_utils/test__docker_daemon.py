"""_docker_daemon: reading daemon.json, judging the runtime, predicting nvidia-ctk's merge
and spotting keys a configure step had no business touching."""

import json

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _docker_daemon as dd

# What operators put in daemon.json (the keys users ask roles to keep).
OPERATOR = {
    "log-driver": "json-file",
    "log-opts": {"max-size": "10m", "max-file": "3"},
    "default-shm-size": "8G",
    "data-root": "/srv/docker",
    "bip": "198.19.0.1/24",
    "default-address-pools": [{"base": "198.19.64.0/18", "size": 24}],
    "live-restore": True,
    "runtimes": {"crun": {"path": "/usr/bin/crun"}},
}


@pytest.mark.parametrize("text, config, error", [
    (None, {}, None),
    ("", {}, None),
    ("  \n", {}, None),
    ('{"bip": "198.19.0.1/24"}', {"bip": "198.19.0.1/24"}, None),
    ("[1, 2]", None, "not a JSON object (found list)"),
])
def test_parse_config(text, config, error):
    assert dd.parse_config(text) == (config, error)


def test_parse_config_names_the_json_error():
    config, error = dd.parse_config('{"bip": "x",}')
    assert config is None and error.startswith("not valid JSON (")


def test_runtime_missing_then_registered():
    assert dd.runtime_status(OPERATOR) == {
        "registered": False, "path": None, "default_runtime": None, "is_default": False,
        "configured": False, "missing": ["runtimes.nvidia"]}
    with_runtime = dict(OPERATOR, runtimes={"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}})
    status = dd.runtime_status(with_runtime)
    assert status["configured"] and status["path"] == "/usr/bin/nvidia-container-runtime"


@pytest.mark.parametrize("config, configured, missing", [
    ({"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}, False, ['"default-runtime": "nvidia"']),
    ({"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}, "default-runtime": "nvidia"}, True, []),
    ({"default-runtime": "nvidia"}, False, ["runtimes.nvidia"]),
    # An entry without a path registers nothing dockerd can run.
    ({"runtimes": {"nvidia": {}}, "default-runtime": "nvidia"}, False, ["runtimes.nvidia"]),
    ({"runtimes": "nvidia"}, False, ["runtimes.nvidia", '"default-runtime": "nvidia"']),
])
def test_runtime_as_default(config, configured, missing):
    status = dd.runtime_status(config, set_default=True)
    assert (status["configured"], status["missing"]) == (configured, missing)


def test_prediction_adds_only_the_runtime_and_keeps_the_input():
    before = json.loads(json.dumps(OPERATOR))
    after = dd.predicted_config(before)
    assert before == OPERATOR, "the input was modified"
    assert after["runtimes"] == {"crun": {"path": "/usr/bin/crun"},
                                 "nvidia": {"args": [], "path": "nvidia-container-runtime"}}
    assert {k: v for k, v in after.items() if k != "runtimes"} == {k: v for k, v in OPERATOR.items() if k != "runtimes"}
    assert "default-runtime" not in after
    assert dd.predicted_config(before, set_default=True)["default-runtime"] == "nvidia"


def test_prediction_keeps_an_existing_runtime_path():
    before = {"runtimes": {"nvidia": {"path": "/opt/nv/runtime", "args": ["--debug"]}}}
    assert dd.predicted_config(before, set_default=True) == dict(before, **{"default-runtime": "nvidia"})


def test_foreign_changes_none_when_only_the_runtime_was_added():
    after = dd.predicted_config(OPERATOR, set_default=True)
    assert dd.foreign_changes(OPERATOR, after, set_default=True) == []
    # Reformatting (as nvidia-ctk rewrites the file) changes nothing in meaning.
    assert dd.foreign_changes(OPERATOR, json.loads(json.dumps(after, indent=1)), set_default=True) == []


def test_foreign_changes_names_every_lost_or_changed_key():
    after = dd.predicted_config(OPERATOR)
    del after["log-opts"]
    after["default-shm-size"] = "64M"
    after["live-restore"] = 1  # true and 1 differ in JSON
    del after["runtimes"]["crun"]
    after["default-runtime"] = "nvidia"  # not asked for
    assert dd.foreign_changes(dict(OPERATOR, **{"default-runtime": "runc"}), after) == [
        "changed default-runtime", "changed default-shm-size", "changed live-restore", "removed log-opts",
        "removed runtimes.crun"]


def test_render_is_stable_json():
    assert dd.render({"b": 1, "a": {"d": 2, "c": 3}}) == '{\n    "a": {\n        "c": 3,\n        "d": 2\n    },\n    "b": 1\n}\n'
