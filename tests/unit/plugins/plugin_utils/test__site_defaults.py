"""The collection-wide defaults: the spec's pins, and copies callers cannot corrupt."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_defaults import site_default


def test_pinned_models_are_the_specs():
    models = site_default("models")
    assert [(m["repo_id"], m["revision"], m.get("drafter", False)) for m in models["tensorfold"]] == [
        ("brandonmusic/GLM-5.3-Flash-tr3-4bpw", "5ab363a8dcf6405955fd5f99671e01a1c9fb124b", False),
        ("incoai/GLM-5.3-Flash-DFlash2", "7d74cdd881ed7e32c31175984a67823127b66cfe", True),
    ]
    assert models["vllm"] == [{"repo_id": "LibertAIDAI/GLM-5.3-Flash-NVFP4",
                               "revision": "9e0d74e3cef17f634e84fb8e2223707e02616290"}]


def test_dirs_follow_the_kits_defaults():
    # serve.sh: HEAD_PREPARED=${HEAD_HF%/*}/glm53-tf/prepared, sessions likewise.
    assert site_default("dirs") == {"hf_cache": "~/.cache/huggingface", "prepared": "~/.cache/glm53-tf/prepared",
                                    "session": "~/.cache/glm53-tf/sessions"}


def test_copies_are_independent_and_unknown_names_fail():
    site_default("disk_need_bytes")["tensorfold"]["checkpoint"] = 1
    assert site_default("disk_need_bytes")["tensorfold"]["checkpoint"] == 165000000000
    with pytest.raises(KeyError, match="known: dirs, disk_need_bytes, models"):
        site_default("nope")
