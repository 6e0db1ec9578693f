"""hf_weights' controller decisions: the drafter's license gate, input errors, the space
refusal with numbers, and the facts the engine roles read."""

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._hf_weights import (
    force_list, held, input_errors, license_notice, select_models, space_errors, weights_facts)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec import site_default

TR3 = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
DFLASH = "incoai/GLM-5.3-Flash-DFlash2"


def test_drafter_is_left_out_until_its_license_is_accepted():
    fetch, refused = select_models(site_default("glm53_models"), "tensorfold", accept_drafter=False)
    assert [m["repo_id"] for m in fetch] == [TR3]
    assert [m["repo_id"] for m in refused] == [DFLASH]
    fetch, refused = select_models(site_default("glm53_models"), "tensorfold", accept_drafter=True)
    assert [m["repo_id"] for m in fetch] == [TR3, DFLASH] and refused == []
    fetch, refused = select_models(site_default("glm53_models"), "vllm", accept_drafter=False)
    assert [m["repo_id"] for m in fetch] == ["LibertAIDAI/GLM-5.3-Flash-NVFP4"] and refused == []


def test_license_notice_is_one_plain_line_naming_the_repo_license_and_switch():
    notice = license_notice([{"repo_id": DFLASH, "license": "CC BY-NC-ND 4.0", "drafter": True}])
    assert notice == ("Drafter not downloaded: incoai/GLM-5.3-Flash-DFlash2 (CC BY-NC-ND 4.0) is licensed for "
                      "non-commercial use only and hf_weights_accept_noncommercial_drafter is false. The engine runs "
                      "with DRAFTER= (MTP drafts only, slower). If your use is non-commercial, set "
                      "hf_weights_accept_noncommercial_drafter: true and rerun.")
    assert license_notice([]) == ""


def test_input_errors_name_the_variable_and_the_value():
    models = {"tensorfold": [{"repo_id": TR3, "revision": "main"}, {"repo_id": DFLASH, "revision": "7d74cdd"}]}
    assert input_errors("tensorfold", models, "rsync", "md5") == [
        "hf_weights_distribution must be one of mirror, download, found 'rsync'",
        "hf_weights_verify must be one of size, sha256, found 'md5'",
        "hf_weights_models: %s revision must be a full 40-hex commit sha, found 'main'" % TR3,
        "hf_weights_models: %s revision must be a full 40-hex commit sha, found '7d74cdd'" % DFLASH,
    ]
    assert input_errors("vllm", models, "mirror", "size") == [
        "hf_weights_models has no entry for path 'vllm' (it has: tensorfold)"]
    assert input_errors("tensorfold", site_default("glm53_models"), "mirror", "sha256") == []


def entry(name, need, free, present=0, dev=7, mount="/home"):
    return {"name": name, "path": "~/" + name, "need": need, "free": free, "present": present, "dev": dev,
            "mount": mount}


def test_space_kinds_on_one_filesystem_add_up_and_present_data_counts():
    ok = [entry("checkpoint", 3 * 10 ** 9, 6 * 10 ** 9, present=1 * 10 ** 9), entry("prepared", 4 * 10 ** 9, 6 * 10 ** 9)]
    assert space_errors("spark-worker", ok, "tensorfold") == []
    short = [entry("checkpoint", 3 * 10 ** 9, 5 * 10 ** 9), entry("prepared", 4 * 10 ** 9, 5 * 10 ** 9)]
    assert space_errors("spark-worker", short, "tensorfold") == [
        "[hf_weights.space] spark-worker: spark-worker needs 7.0 GB more on /home for checkpoint+prepared (path "
        "tensorfold), but 5.0 GB is free: free 2.0 GB on /home (~/checkpoint, ~/prepared) or point glm53_hf_cache_dir "
        "/ glm53_prepared_dir / glm53_session_dir at a larger disk. Nothing was downloaded."]


def test_space_on_separate_filesystems_is_judged_apart():
    entries = [entry("checkpoint", 3 * 10 ** 9, 4 * 10 ** 9, dev=1, mount="/data"),
               entry("session", 2 * 10 ** 9, 1 * 10 ** 9, dev=2, mount="/")]
    errors = space_errors("spark-head", entries, "tensorfold")
    assert len(errors) == 1 and "1.0 GB is free" in errors[0] and " on / for session" in errors[0]
    assert space_errors("n", [{"name": "checkpoint", "error": "/x: Permission denied"}], "vllm") == [
        "[hf_weights.space] n: cannot measure free space: /x: Permission denied"]


def test_facts_give_host_and_container_paths_and_the_drafter_decision():
    snap = "/home/spark/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/snapshots/" + "5" * 40
    facts = weights_facts("tensorfold", [{"repo_id": TR3, "revision": "5" * 40, "path": snap}],
                          refused=[{"repo_id": DFLASH}])
    assert facts["hf_cache_dir"] == "/home/spark/.cache/huggingface"
    assert facts["model_path"] == ("/root/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/snapshots/"
                                   + "5" * 40)
    assert facts["drafter_path"] == "" and facts["drafter"] is False and facts["drafter_refused"] == [DFLASH]
    drafter = "/d/hub/models--incoai--GLM-5.3-Flash-DFlash2/snapshots/" + "7" * 40
    facts = weights_facts("tensorfold", [{"repo_id": TR3, "revision": "5" * 40, "path": snap},
                                         {"repo_id": DFLASH, "revision": "7" * 40, "path": drafter, "drafter": True}], [])
    assert facts["drafter_path"] == "/root/.cache/huggingface/hub/models--incoai--GLM-5.3-Flash-DFlash2/snapshots/" + "7" * 40
    assert facts["drafter"] is True


def test_held_and_force_from_looped_results():
    results = [{"item": {"repo_id": TR3, "revision": "5" * 40}, "verified": True, "path": "/p", "bytes": 10},
               {"item": {"repo_id": DFLASH, "revision": "7" * 40, "drafter": True}, "failed": True, "verified": False,
                "missing": ["model.safetensors"], "msg": "size differs"}]
    models = held(results)
    assert [(m["repo_id"], m["verified"], m["drafter"]) for m in models] == [(TR3, True, False), (DFLASH, False, True)]
    assert force_list(models) == [{"repo_id": DFLASH, "name": "model.safetensors"}]
