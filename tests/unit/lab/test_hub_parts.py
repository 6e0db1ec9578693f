"""The lab hub's parts without a client or a socket: the checks of injected faults, which
response a drop cuts, the shared bucket's chunk size, Range parsing, and the code version
that restarts a running hub when any of its modules changes."""

import shutil
import sys
from pathlib import Path

import pytest

HUB_DIR = Path(__file__).resolve().parents[3] / "lab" / "hub"
sys.path.insert(0, str(HUB_DIR))

import hub  # noqa: E402  pylint: disable=wrong-import-position
import hub_faults  # noqa: E402  pylint: disable=wrong-import-position
import hub_http  # noqa: E402  pylint: disable=wrong-import-position


# ------------------------------------------------------------------------------ faults


def test_check_faults_keeps_only_the_keys_given_and_fills_in_the_defaults():
    assert hub_faults.check_faults({}) == {}
    assert hub_faults.check_faults({"rate_bps": None}) == {"rate_bps": None}
    assert hub_faults.check_faults({"drop": None}) == {"drop": {}}
    assert hub_faults.check_faults({"drop": {"a.bin": {"after_bytes": 0}}, "rate_bps": 1e6}) == {
        "drop": {"a.bin": {"after_bytes": 0, "times": 1, "reset": False, "done": 0}}, "rate_bps": 1e6}


@pytest.mark.parametrize("faults, message", [
    ([], "faults: expected a JSON object"),
    ({"drops": {}}, "unknown key(s) ['drops']"),
    ({"drop": {"a": {"after_bytes": -1}}}, "drop['a']: expected"),
    ({"drop": {"a": {"after_bytes": "5"}}}, "drop['a']: expected"),
    ({"drop": {"a": {"after_bytes": 5, "times": 0}}}, "drop['a'].times: expected a count >= 1"),
    ({"rate_bps": 0}, "rate_bps: expected bytes per second > 0"),
    ({"rate_bps": "fast"}, "rate_bps: expected bytes per second > 0"),
])
def test_check_faults_names_what_is_wrong(faults, message):
    with pytest.raises(ValueError) as info:
        hub_faults.check_faults(faults)
    assert message in str(info.value)


def test_a_bad_fault_changes_nothing():
    faults = hub_faults.Faults(1000.0)
    faults.set({"drop": {"a": {"after_bytes": 5}}})
    with pytest.raises(ValueError):
        faults.set({"drop": {}, "rate_bps": -1})
    assert faults.current() == {"drop": {"a": {"after_bytes": 5, "times": 1, "reset": False, "done": 0}},
                                "rate_bps": 1000.0}


def test_a_drop_cuts_its_file_the_times_asked_then_clear_restores_the_start():
    faults = hub_faults.Faults(1000.0)
    faults.set({"drop": {"org/m/a.bin": {"after_bytes": 100, "times": 2, "reset": True}, "b.bin": {"after_bytes": 10}},
                "rate_bps": None})
    assert faults.claim_drop("org/m", "c.bin", 0, 1000) is None
    # A ranged request that starts past the cut point is cut where it starts; one that ends
    # before it is not cut and does not use up a time.
    assert faults.claim_drop("org/m", "a.bin", 0, 50) is None
    assert faults.claim_drop("org/m", "a.bin", 0, 1000) == (100, True)
    assert faults.claim_drop("org/m", "a.bin", 500, 1000) == (500, True)
    assert faults.claim_drop("org/m", "a.bin", 0, 1000) is None
    assert faults.claim_drop("other/x", "b.bin", 0, 1000) == (10, False)  # a bare name matches any repo
    assert faults.current()["rate_bps"] is None
    faults.clear()
    assert faults.current() == {"drop": {}, "rate_bps": 1000.0}


def test_every_time_drops_never_run_out():
    faults = hub_faults.Faults()
    faults.set({"drop": {"a.bin": {"after_bytes": 1, "times": None}}})
    assert all(faults.claim_drop("r/x", "a.bin", 0, 9) == (1, False) for _attempt in range(5))


def test_the_bucket_writes_about_fifty_chunks_a_second():
    bucket = hub_faults.TokenBucket()
    assert bucket.chunk_size() == hub_faults.SEND_CHUNK
    bucket.set_rate(1e6)
    assert bucket.chunk_size() == 20000
    bucket.set_rate(1000)
    assert bucket.chunk_size() == 4096
    bucket.set_rate(1e12)
    assert bucket.chunk_size() == hub_faults.SEND_CHUNK
    bucket.set_rate(None)
    bucket.take(1 << 30)  # unlimited: returns at once


# ------------------------------------------------------------------------------- http


@pytest.mark.parametrize("value, expected", [
    ("bytes=0-99", (0, 100)),
    ("bytes=100-", (100, 1000)),
    ("bytes=-100", (900, 1000)),
    ("bytes=-5000", (0, 1000)),
    ("bytes=990-5000", (990, 1000)),
    (" bytes=5-5 ", (5, 6)),
    ("bytes=1000-", "unsatisfiable"),
    ("bytes=-0", "unsatisfiable"),
    ("bytes=9-3", "unsatisfiable"),
    ("bytes=-", None),
    ("bytes=0-1,5-6", None),
    ("items=0-1", None),
])
def test_parse_range(value, expected):
    assert hub_http._parse_range(value, 1000) == expected  # pylint: disable=protected-access


def test_xet_hash_looks_like_one_and_is_not_the_sha256():
    sha = "a" * 64
    value = hub_http.xet_hash(sha)
    assert len(value) == 64 and int(value, 16) >= 0 and value != sha
    assert value == hub_http.xet_hash(sha) != hub_http.xet_hash("b" * 64)


# ------------------------------------------------------------------------ code version


def test_code_version_covers_every_module_of_the_hub(tmp_path, monkeypatch):
    for path in HUB_DIR.glob("*.py"):
        shutil.copy(str(path), str(tmp_path / path.name))
    monkeypatch.setattr(hub, "HERE", tmp_path)
    before = hub.code_version()
    assert before == hub.code_version() and len(before) == 12
    # Whichever module changes, the version changes (so `up` restarts a running hub).
    for name in ("hub.py", "hub_http.py", "hub_faults.py", "repos.py"):
        path = tmp_path / name
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert hub.code_version() != before, name
        path.write_bytes(original)
    assert hub.code_version() == before
    (tmp_path / "hub_new.py").write_text("")
    assert hub.code_version() != before
