"""The file set of hf_mirror from a manifest on a cache tree, its balancing over streams, and
the following of a running rsync's progress."""

import json
import os

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_mirror as hm
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import (
    REVISION,
    folder,
    make_snapshot,
)

MIB = 1 << 20


# ----------------------------------------------------------------------------- the plan


def test_plan_lists_blobs_links_and_the_manifest(tmp_path):
    doc = make_snapshot(tmp_path, files={"a.safetensors": b"A" * 1000, "sub/b.json": b"{}\n", "same.bin": b"A" * 1000})
    plan = hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    base = folder("org/model")
    blob_a = "%s/blobs/%s" % (base, doc["files"][0]["sha256"])
    assert plan["dirs"] == [base, base + "/blobs"]
    # Two files with the same content share one blob: it is sent once.
    assert plan["blobs"] == {blob_a: 1000, "%s/blobs/%s" % (base, doc["files"][2]["sha256"]): 3}
    assert sorted(plan["links"]) == ["%s/snapshots/%s/%s" % (base, REVISION, name)
                                     for name in ("a.safetensors", "same.bin", "sub/b.json")]
    manifest = "%s/.glm53/%s.json" % (base, REVISION)
    assert plan["manifests"] == {manifest: os.path.getsize(str(tmp_path / "hub" / manifest))}
    assert plan["snapshot_files"] == 3 and plan["forced"] == set() and plan["warnings"] == []
    assert not any("refs" in path for path in list(plan["blobs"]) + plan["links"])


def test_plan_maps_forced_names_to_their_blobs(tmp_path):
    doc = make_snapshot(tmp_path)
    plan = hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}],
                         force=[{"repo_id": "org/model", "name": "model.safetensors"},
                                {"repo_id": "other/repo", "name": "x.bin"}])
    sha = [row["sha256"] for row in doc["files"] if row["name"] == "model.safetensors"][0]
    assert plan["forced"] == {"%s/blobs/%s" % (folder("org/model"), sha)}
    assert plan["warnings"] == ["force: other/repo is not in models; x.bin not re-sent"]
    with pytest.raises(hm.MirrorError, match="force: nope.bin is not a file of the org/model snapshot on the head"):
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}],
                      force=[{"repo_id": "org/model", "name": "nope.bin"}])


def test_plan_without_a_manifest_says_to_run_hf_snapshot(tmp_path):
    make_snapshot(tmp_path, manifest=False)
    with pytest.raises(hm.MirrorError) as info:
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    assert str(info.value).startswith("no verified snapshot of org/model@%s on the head" % REVISION)
    assert str(info.value).endswith("run hf_snapshot there first")


def test_plan_refuses_a_manifest_of_another_revision(tmp_path):
    make_snapshot(tmp_path)
    path = tmp_path / "hub" / folder("org/model") / ".glm53" / (REVISION + ".json")
    doc = json.loads(path.read_text())
    doc["revision"] = "f" * 40
    path.write_text(json.dumps(doc))
    with pytest.raises(hm.MirrorError, match=r"is unusable \(it is for org/model@f{40}\): run hf_snapshot there again"):
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])


def test_plan_refuses_a_head_snapshot_that_lost_or_changed_files(tmp_path):
    doc = make_snapshot(tmp_path)
    blobs = tmp_path / "hub" / folder("org/model") / "blobs"
    by_name = dict((row["name"], row["sha256"]) for row in doc["files"])
    (blobs / by_name["config.json"]).unlink()
    with open(str(blobs / by_name["model.safetensors"]), "ab") as handle:
        handle.write(b"x")
    with pytest.raises(hm.MirrorError) as info:
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    message = str(info.value)
    assert "config.json is missing" in message
    assert "model.safetensors is %d bytes, the manifest says %d" % (3 * MIB + 1, 3 * MIB) in message
    assert message.endswith("run hf_snapshot there again (it fetches what is missing or wrong)")


def test_plan_refuses_links_out_of_the_blobs_dir(tmp_path):
    make_snapshot(tmp_path)
    outside = tmp_path / "secret"
    outside.write_bytes(b"{}\n")
    link = tmp_path / "hub" / folder("org/model") / "snapshots" / REVISION / "config.json"
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(hm.MirrorError, match="config.json links to %s, not to a file in" % outside):
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])


def test_plan_copies_a_regular_snapshot_file_as_it_is(tmp_path):
    make_snapshot(tmp_path)
    path = tmp_path / "hub" / folder("org/model") / "snapshots" / REVISION / "config.json"
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)
    plan = hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    rel = "%s/snapshots/%s/config.json" % (folder("org/model"), REVISION)
    assert plan["blobs"][rel] == len(data) and rel not in plan["links"]


def test_plan_follows_a_blob_link_only_inside_the_cache(tmp_path):
    doc = make_snapshot(tmp_path)
    hub = tmp_path / "hub"
    by_name = dict((row["name"], row) for row in doc["files"])
    # A blob that links into huggingface_hub's shared store, inside the cache: sent (as its bytes).
    shared = hub / "blobs" / "ab" / ("ab" + "0" * 62)
    shared.parent.mkdir(parents=True)
    blob = hub / folder("org/model") / "blobs" / by_name["model.safetensors"]["sha256"]
    blob.rename(shared)
    blob.symlink_to(os.path.relpath(str(shared), str(blob.parent)))
    plan = hm.build_plan(str(hub), [{"repo_id": "org/model", "revision": REVISION}])
    assert plan["blobs"]["%s/blobs/%s" % (folder("org/model"), blob.name)] == by_name["model.safetensors"]["size"]
    # One that leads out of the cache is refused, naming it.
    outside = tmp_path / "elsewhere"
    outside.write_bytes(b'{"a": 1}\n')
    small = hub / folder("org/model") / "blobs" / by_name["config.json"]["sha256"]
    small.unlink()
    small.symlink_to(str(outside))
    with pytest.raises(hm.MirrorError) as info:
        hm.build_plan(str(hub), [{"repo_id": "org/model", "revision": REVISION}])
    assert "config.json: its blob %s/blobs/%s links to %s, outside the cache %s" % (
        folder("org/model"), small.name, outside, hub) in str(info.value)


# ---------------------------------------------------------------------------- balancing


def test_balance_puts_the_largest_first_on_the_lightest_stream():
    sizes = {"a": 10, "b": 9, "c": 8, "d": 7, "e": 1}
    lists = hm.balance(sizes, 2)
    totals = sorted(sum(sizes[p] for p in paths) for paths in lists)
    assert totals == [17, 18]
    assert sorted(p for paths in lists for p in paths) == sorted(sizes)


def test_balance_never_makes_more_streams_than_files_nor_empty_ones():
    assert hm.balance({"a": 5, "b": 5}, 16) == [["a"], ["b"]]
    assert hm.balance({"x": 0, "y": 0, "z": 0}, 2) == [["x", "z"], ["y"]]
    assert hm.balance({}, 4) == []


def test_balance_evens_out_many_equal_shards():
    sizes = dict(("model-%05d.safetensors" % i, 5 << 30) for i in range(37))
    sizes["config.json"] = 1000
    lists = hm.balance(sizes, 4)
    totals = [sum(sizes[p] for p in paths) for paths in lists]
    assert len(lists) == 4 and max(totals) - min(totals) <= 5 << 30


def test_output_tail_follows_a_growing_file_and_split_records(tmp_path):
    path = tmp_path / "out"
    tail = hm.OutputTail(str(path))
    tail.poll()
    assert (tail.bytes, tail.files) == (0, 0)
    path.write_bytes(b"GLM53-ITEM >f+++++++++ 100 x\n\r      32,768   0%    0.00kB/s    0:00:00 (xfr#0, to-c")
    tail.poll()
    assert (tail.bytes, tail.files) == (0, 0)
    with open(str(path), "ab") as handle:
        handle.write(b"hk=1/2)\r  2,000,000  99%  10.00MB/s    0:00:00 (xfr#1, to-chk=0/2)\r")
    tail.poll()
    assert (tail.bytes, tail.files) == (2000000, 1)


def test_record_base_is_one_record_per_destination_under_the_hub_locks():
    base = hm.record_base("/c/hub", "spark@198.18.1.11", "~/.cache/huggingface")
    assert base.startswith("/c/hub/.locks/dgx_spark.glm53/mirror-spark@198.18.1.11-")
    assert base != hm.record_base("/c/hub", "spark@198.18.1.11", "/srv/hf")
    assert base == hm.record_base("/c/hub", "spark@198.18.1.11", "~/.cache/huggingface")
    assert os.path.basename(hm.record_base("/c/hub", "", "/srv/hf")).startswith("mirror-local-")
    assert "/" not in os.path.basename(hm.record_base("/c/hub", "a b/c", "/d"))
