"""The operations state directory on the head (_ops_state.State) and the kit's lock (Lock):
the stamp, the log, the counter, the markers a start clears, heals.json and the evidence
directory; the lock against another open file description (flock is per description, so a
second open() in this process stands for another process)."""

import fcntl
import json
import os
import re

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _ops_state as st

STAMP_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
# 2026-12-02T07:01:02Z
NOW = 1796194862.0


class FakeClock(object):
    """A clock that moves only when sleep is called."""

    def __init__(self, start=100.0):
        self.now = start
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def hold(path):
    """flock ``path`` exclusively on a handle of its own; the caller closes it."""
    handle = open(str(path), "a")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


# -- the stamp -----------------------------------------------------------------------------


def test_utc_is_the_date_u_stamp():
    assert st.utc(0) == "1970-01-01T00:00:00Z"
    assert st.utc(NOW) == "2026-12-02T07:01:02Z"
    assert st.utc(NOW + 0.999) == "2026-12-02T07:01:02Z"


def test_utc_without_a_time_is_now_in_the_same_format():
    assert STAMP_RE.match(st.utc())


# -- the log -------------------------------------------------------------------------------


def test_log_appends_one_stamped_line_a_call(tmp_path):
    state = st.State(str(tmp_path / "state"), clock=lambda: NOW)
    first = state.log("start (playbook): path vllm")
    second = state.log("a message\nover two lines\tand a tab")
    assert first == "2026-12-02T07:01:02Z start (playbook): path vllm"
    assert second == "2026-12-02T07:01:02Z a message over two lines and a tab"
    text = (tmp_path / "state" / st.LOG).read_text()
    assert text == first + "\n" + second + "\n"
    assert state.log_tail(1) == [second]
    assert state.log_tail() == [first, second]


def test_each_log_line_has_the_clock_of_its_call(tmp_path):
    times = iter([0.0, 86400.0])
    state = st.State(str(tmp_path), clock=lambda: next(times))
    state.log("one")
    state.log("two")
    assert state.log_tail() == ["1970-01-01T00:00:00Z one", "1970-01-02T00:00:00Z two"]


def test_the_log_name_is_the_callers(tmp_path):
    state = st.State(str(tmp_path), log_name="tf-prod.log", clock=lambda: 0)
    state.log("x")
    assert (tmp_path / "tf-prod.log").read_text() == "1970-01-01T00:00:00Z x\n"
    assert not (tmp_path / st.LOG).exists()


def test_reads_never_make_the_directory(tmp_path):
    state = st.State(str(tmp_path / "absent"))
    assert state.fails() == 0
    assert state.disabled() is False
    assert state.halted() is None
    assert state.heals() == []
    assert state.log_tail() == []
    state.update_last_heal(result="ready")
    assert not (tmp_path / "absent").exists()


def test_the_directory_is_expanded_from_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    state = st.State("~/glm53/state", clock=lambda: 0)
    state.log("x")
    assert (tmp_path / "glm53" / "state" / st.LOG).is_file()


# -- the counter ---------------------------------------------------------------------------


def test_fails_counter_reads_writes_and_removes(tmp_path):
    state = st.State(str(tmp_path))
    assert state.fails() == 0
    state.set_fails(3)
    assert (tmp_path / st.FAILS).read_text() == "3\n"
    assert state.fails() == 3
    state.set_fails(0)
    assert not (tmp_path / st.FAILS).exists()
    assert state.fails() == 0


@pytest.mark.parametrize("text", ["garbage\n", "", "-4\n", "2.5"])
def test_an_unreadable_or_negative_counter_is_zero(tmp_path, text):
    (tmp_path / st.FAILS).write_text(text)
    assert st.State(str(tmp_path)).fails() == 0


def test_no_temporary_file_is_left_behind(tmp_path):
    state = st.State(str(tmp_path))
    state.set_fails(2)
    state.halt("why")
    state.add_heal({"at": 1})
    assert sorted(os.listdir(str(tmp_path))) == sorted([st.FAILS, st.HALTED, st.HEALS])


# -- DISABLED, halted and what a start clears ------------------------------------------------


def test_disable_and_halt_write_stamped_markers(tmp_path):
    state = st.State(str(tmp_path), clock=lambda: NOW)
    assert not state.disabled()
    state.disable("stop (stop.yml)")
    assert state.disabled()
    assert (tmp_path / st.DISABLED).read_text() == "2026-12-02T07:01:02Z stop (stop.yml)\n"
    state.halt("heal budget spent")
    assert state.halted() == "2026-12-02T07:01:02Z heal budget spent"


def test_cleared_by_start_returns_what_it_removed(tmp_path):
    state = st.State(str(tmp_path), clock=lambda: 0)
    state.disable("stop")
    state.set_fails(2)
    state.halt("budget")
    state.add_heal({"at": 1})
    state.log("kept")
    assert state.cleared_by_start() == [st.DISABLED, st.FAILS, st.HALTED]
    assert not state.disabled() and state.fails() == 0 and state.halted() is None
    # heals.json and the log are history: a start keeps them.
    assert state.heals() == [{"at": 1}]
    assert state.log_tail() == ["1970-01-01T00:00:00Z kept"]
    assert state.cleared_by_start() == []


def test_cleared_by_start_names_only_the_markers_that_were_there(tmp_path):
    state = st.State(str(tmp_path))
    state.halt("fatal: x")
    assert state.cleared_by_start() == [st.HALTED]


# -- heals.json ------------------------------------------------------------------------------


def test_heals_keep_at_most_heals_kept_the_newest(tmp_path):
    state = st.State(str(tmp_path))
    for number in range(st.HEALS_KEPT + 5):
        state.add_heal({"at": number})
    heals = state.heals()
    assert len(heals) == st.HEALS_KEPT
    assert heals[0] == {"at": 5}
    assert heals[-1] == {"at": st.HEALS_KEPT + 4}


def test_update_last_heal_changes_only_the_last(tmp_path):
    state = st.State(str(tmp_path))
    state.add_heal({"at": 1, "result": "ready"})
    state.add_heal({"at": 2, "result": "running"})
    state.update_last_heal(result="failed", detail="not ready", seconds=12.5)
    assert state.heals() == [{"at": 1, "result": "ready"},
                             {"at": 2, "result": "failed", "detail": "not ready", "seconds": 12.5}]
    assert json.loads((tmp_path / st.HEALS).read_text()) == state.heals()


def test_update_last_heal_without_heals_writes_nothing(tmp_path):
    state = st.State(str(tmp_path))
    state.update_last_heal(result="ready")
    assert not (tmp_path / st.HEALS).exists()


@pytest.mark.parametrize("text, expected", [
    ("not json", []),
    ('{"at": 1}', []),
    ('[{"at": 1}, 2, "x", null, {"at": 3}]', [{"at": 1}, {"at": 3}]),
])
def test_heals_tolerates_a_damaged_file(tmp_path, text, expected):
    (tmp_path / st.HEALS).write_text(text)
    assert st.State(str(tmp_path)).heals() == expected


# -- evidence ---------------------------------------------------------------------------------


def test_evidence_dir_has_no_colon_and_exists(tmp_path):
    state = st.State(str(tmp_path))
    directory = state.evidence_dir("2026-12-02T07:01:02Z")
    assert os.path.isdir(directory)
    assert os.path.dirname(directory) == str(tmp_path / st.EVIDENCE)
    assert os.path.basename(directory) == "2026-12-02T070102Z"
    assert ":" not in os.path.basename(directory)
    # A second heal in the same second reuses it rather than failing.
    assert state.evidence_dir("2026-12-02T07:01:02Z") == directory


# -- the lock ---------------------------------------------------------------------------------


def test_lock_acquire_and_release(tmp_path):
    path = tmp_path / "run" / "lock"
    lock = st.Lock(str(path))
    assert lock.acquire(0) is True
    assert path.exists()  # made with its directory
    other = st.Lock(str(path))
    assert other.acquire(0) is False
    assert other.handle is None
    lock.release()
    assert lock.handle is None
    assert other.acquire(0) is True
    other.release()


def test_release_twice_is_harmless(tmp_path):
    lock = st.Lock(str(tmp_path / "lock"))
    lock.acquire(0)
    lock.release()
    lock.release()


def test_acquire_now_fails_while_another_handle_holds_flock(tmp_path):
    path = tmp_path / "lock"
    holder = hold(path)
    try:
        assert st.Lock(str(path)).acquire(0) is False
    finally:
        holder.close()
    assert st.Lock(str(path)).acquire(0) is True


def test_held_elsewhere(tmp_path):
    path = tmp_path / "lock"
    lock = st.Lock(str(path))
    assert lock.held_elsewhere() is False  # no file yet
    assert not path.exists()  # and asking made none
    path.write_text("")
    assert lock.held_elsewhere() is False
    holder = hold(path)
    try:
        assert lock.held_elsewhere() is True
    finally:
        holder.close()
    assert lock.held_elsewhere() is False
    # Asking let go at once: the lock can be taken after.
    assert lock.handle is None
    assert st.Lock(str(path)).acquire(0) is True


def test_acquire_with_a_wait_gives_up_at_the_deadline(tmp_path):
    path = tmp_path / "lock"
    holder = hold(path)
    clock = FakeClock()
    try:
        lock = st.Lock(str(path))
        assert lock.acquire(1.0, clock=clock, sleep=clock.sleep) is False
    finally:
        holder.close()
    assert lock.handle is None
    assert clock.sleeps and all(s == 0.2 for s in clock.sleeps)
    assert 4 <= len(clock.sleeps) <= 6
    assert clock.now == pytest.approx(101.0, abs=0.21)


def test_acquire_with_a_wait_takes_the_lock_once_let_go(tmp_path):
    path = tmp_path / "lock"
    holder = hold(path)
    clock = FakeClock()

    def sleep(seconds):
        clock.sleep(seconds)
        if len(clock.sleeps) == 3:
            holder.close()

    lock = st.Lock(str(path))
    try:
        assert lock.acquire(60.0, clock=clock, sleep=sleep) is True
    finally:
        holder.close()
        lock.release()
    assert len(clock.sleeps) == 3


def test_lock_as_a_context_manager_releases(tmp_path):
    path = tmp_path / "lock"
    with st.Lock(str(path)) as lock:
        assert lock.acquire(0)
        assert st.Lock(str(path)).held_elsewhere()
    assert not st.Lock(str(path)).held_elsewhere()
