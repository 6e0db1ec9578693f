"""One watchdog tick and its heal (_watchdog): the verdict from wait_for_slots' Waiter result,
the stand-downs (DISABLED, halted, the kit's lock), the fail counter, the heal under the lock
within its hourly budget, the alerts (log line, command, webhook) and cron's ticks for a minute.

The Waiter, the start, the evidence and the Cluster are fakes; the state directory, the lock
file, the alert command and the webhook's HTTP server are real (127.0.0.1)."""

import fcntl
import http.server
import json
import socket
import sys
import threading

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _ops_state as st
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _watchdog as wd

NOW = 1796194862.0  # 2026-12-02T07:01:02Z
STARTED_AT = "2026-12-02T07:00:02.123456789Z"  # 59.876543211 s before NOW
OLD_STARTED_AT = "2026-12-01T07:00:02.5Z"
UNHEALTHY_MESSAGE = ("not ready: rank 0 (glm53-tf-r0 on spark-head) exited with code 1 (OOMKilled: false): last lines: "
                     "Traceback | RuntimeError: NCCL error; rank 1 (glm53-tf-r1 on spark-worker) exited with code 1 "
                     "(OOMKilled: false): last lines: peer gone | bye")


def hold(path):
    handle = open(str(path), "a")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def rank0(state="running", started_at=OLD_STARTED_AT):
    return {"rank": 0, "node": "spark-head", "container": "glm53-tf-r0", "state": state, "started_at": started_at}


def healthy(busy=False):
    return {"ready": True, "busy": busy, "health": {"status": "ok", "streams_max": 4}, "ranks": [rank0()],
            "reason": None}, None


def unhealthy(message=UNHEALTHY_MESSAGE):
    return {"ready": False, "busy": False, "health": None, "ranks": [rank0("exited")], "reason": "exited"}, message


def fatal():
    return {"ready": False, "health": {"status": "error", "fatal": "CUDA error: an illegal memory access"},
            "ranks": [rank0()], "reason": "x"}, "not ready: x"


# -- fakes ------------------------------------------------------------------------------------


class FakeWaiter(object):
    """Stands for _readiness_poll.Waiter: run() returns the next queued (result, msg)."""

    results = []
    made = []
    during_run = None

    def __init__(self, params, head_node=None):
        self.params = params
        self.head_node = head_node
        FakeWaiter.made.append(self)

    def run(self):
        if FakeWaiter.during_run:
            FakeWaiter.during_run()
        return FakeWaiter.results.pop(0)


class FakeCluster(object):
    made = []

    def __init__(self, config):
        self.config = config
        self.closed = False
        FakeCluster.made.append(self)

    def close(self):
        self.closed = True


class World(object):
    """The fakes of one test and what they saw."""

    def __init__(self, tmp_path, monkeypatch):
        self.tmp = tmp_path
        self.state = st.State(str(tmp_path / "state"), clock=lambda: NOW)
        self.lock_path = tmp_path / "run" / "lock"
        self.config = {
            "path": "tensorfold", "url": "http://127.0.0.1:9", "slots": 4, "lock": str(self.lock_path),
            "ranks": [{"rank": 0, "node": "spark-head", "container": "glm53-tf-r0", "ssh": None},
                      {"rank": 1, "node": "spark-worker", "container": "glm53-tf-r1", "ssh": "spark@198.18.1.11"}],
        }
        self.starts = []
        self.evidence = []
        self.start_result = {"ok": True, "busy": False, "msg": "READY 4 slots in 95 s"}
        FakeWaiter.results, FakeWaiter.made, FakeWaiter.during_run = [], [], None
        FakeCluster.made = []
        monkeypatch.setattr(wd, "Waiter", FakeWaiter)
        monkeypatch.setattr(wd, "Cluster", FakeCluster)
        monkeypatch.setattr(wd, "start", self.start)
        monkeypatch.setattr(wd, "save_evidence", self.save_evidence)

    def start(self, config, state, by, lock=None):
        # The heal holds the kit's lock while it starts: nobody else can take it now.
        self.starts.append({"by": by, "lock_held": st.Lock(config["lock"]).held_elsewhere(),
                            "lock_passed": lock is not None and lock.handle is not None})
        return dict(self.start_result)

    def save_evidence(self, cluster, state, reason, stamp):
        directory = state.evidence_dir(stamp)
        self.evidence.append({"cluster": cluster, "reason": reason, "stamp": stamp, "fails": state.fails()})
        return directory

    def tick(self, *results, **settings):
        FakeWaiter.results.extend(results)
        return wd.tick(self.config, settings, self.state, now=lambda: NOW)

    def log(self):
        path = self.tmp / "state" / st.LOG
        return path.read_text() if path.exists() else ""


@pytest.fixture
def world(tmp_path, monkeypatch):
    return World(tmp_path, monkeypatch)


# -- started_epoch ----------------------------------------------------------------------------


def test_started_epoch_reads_docker_nanoseconds():
    assert wd.started_epoch(STARTED_AT) == pytest.approx(NOW - 60 + 0.123456789)
    assert wd.started_epoch("2026-12-02T07:01:02Z") == NOW
    assert wd.started_epoch("1970-01-01T00:00:01.5Z") == 1.5


@pytest.mark.parametrize("text", [
    "0001-01-01T00:00:00Z",  # docker's zero time: never started
    None, "", "garbage", "2026-12-02 07:01:02Z", "2026-12-02T07:01:02+00:00", "2026-12-02T07:01:02.Z",
    "2026-12-02T07:01:02",
])
def test_started_epoch_is_none_for_zero_time_and_garbage(text):
    assert wd.started_epoch(text) is None


# -- brief ------------------------------------------------------------------------------------


def test_brief_drops_each_ranks_log_tail():
    assert wd.brief(UNHEALTHY_MESSAGE) == (
        "not ready: rank 0 (glm53-tf-r0 on spark-head) exited with code 1 (OOMKilled: false); "
        "rank 1 (glm53-tf-r1 on spark-worker) exited with code 1 (OOMKilled: false)")


def test_brief_drops_a_multiline_tail_and_keeps_the_hint_before_it():
    reason = ("rank 0 (glm53-tf-r0 on spark-head) was OOM-killed (exit code 137, OOMKilled: true): lower the "
              "slots: last lines: line one\nline two | three")
    assert wd.brief(reason) == ("rank 0 (glm53-tf-r0 on spark-head) was OOM-killed (exit code 137, OOMKilled: true): "
                                "lower the slots")


def test_brief_caps_the_length_on_one_line():
    reason = "canary timed out\n" + "x" * 1000
    out = wd.brief(reason)
    assert len(out) == wd.REASON_CHARS
    assert out.endswith("...")
    assert "\n" not in out
    assert out.startswith("canary timed out x")


def test_brief_of_nothing_is_empty():
    assert wd.brief(None) == ""
    assert wd.brief("canary answered HTTP 500") == "canary answered HTTP 500"


# -- judge ------------------------------------------------------------------------------------


def test_judge_fatal_from_the_health_body_even_when_ready():
    result = {"ready": True, "health": {"fatal": "CUDA error"}, "ranks": []}
    verdict = wd.judge(result, None, NOW, 1800)
    assert verdict["kind"] == "fatal"
    assert verdict["reason"] == "the engine reports a fatal error: CUDA error"


def test_judge_ready_is_healthy():
    assert wd.judge(healthy()[0], None, NOW, 1800) == {"kind": "healthy", "reason": None}


def test_judge_busy_is_healthy_with_a_reason():
    expected = {"kind": "healthy", "reason": "busy, counters advancing"}
    assert wd.judge(healthy(busy=True)[0], None, NOW, 1800) == expected


def test_judge_a_young_running_rank0_without_an_answer_is_loading():
    result = {"ready": False, "health": None, "ranks": [rank0(started_at=STARTED_AT)]}
    verdict = wd.judge(result, "not ready after 5 s: /health did not answer", NOW, 1800)
    assert verdict["kind"] == "loading"
    assert verdict["reason"] == "rank 0 started 60 s ago and does not answer yet (grace 1800 s)"


def test_judge_an_old_running_rank0_without_an_answer_is_unhealthy():
    result = {"ready": False, "health": None, "ranks": [rank0(started_at=STARTED_AT)]}
    verdict = wd.judge(result, "not ready after 5 s: /health did not answer", NOW, 30)
    assert verdict == {"kind": "unhealthy", "reason": "not ready after 5 s: /health did not answer"}


def test_judge_an_answering_unhealthy_engine_inside_the_grace_is_unhealthy():
    result = {"ready": False, "health": {"status": "error"}, "ranks": [rank0(started_at=STARTED_AT)]}
    verdict = wd.judge(result, "canary answered HTTP 500", NOW, 1800)
    assert verdict == {"kind": "unhealthy", "reason": "canary answered HTTP 500"}


@pytest.mark.parametrize("head", [
    rank0("exited", STARTED_AT),  # not running
    rank0("running", "0001-01-01T00:00:00Z"),  # no start time
    dict(rank0("running", STARTED_AT), rank=1),  # not rank 0
])
def test_judge_loading_needs_a_running_rank0_with_a_start_time(head):
    result = {"ready": False, "health": None, "ranks": [head]}
    assert wd.judge(result, None, NOW, 1800)["kind"] == "unhealthy"


def test_judge_unhealthy_reason_falls_back_to_the_result_then_not_ready():
    assert wd.judge({"ready": False, "reason": "slots 2 of 4"}, None, NOW, 1800)["reason"] == "slots 2 of 4"
    assert wd.judge({"ready": False}, None, NOW, 1800)["reason"] == "not ready"
    assert "last lines" not in wd.judge(unhealthy()[0], UNHEALTHY_MESSAGE, NOW, 1800)["reason"]


# -- heals_in_last_hour -----------------------------------------------------------------------


def test_heals_in_last_hour():
    heals = [{"at": NOW - 3601}, {"at": NOW - 3600}, {"at": NOW - 3599}, {"at": NOW - 1}, {"at": "yesterday"}, {}]
    assert wd.heals_in_last_hour(heals, NOW) == [{"at": NOW - 3599}, {"at": NOW - 1}]


# -- tick: stand-downs ------------------------------------------------------------------------


def test_disabled_stands_down_and_writes_nothing(world):
    world.state.disable("stop (stop.yml)")
    before = sorted(p.name for p in (world.tmp / "state").iterdir())
    assert world.tick(unhealthy()) == {"verdict": "disabled"}
    assert FakeWaiter.made == []
    assert sorted(p.name for p in (world.tmp / "state").iterdir()) == before
    assert world.state.fails() == 0


def test_halted_stands_down(world):
    world.state.halt("heal budget spent")
    assert world.tick(unhealthy()) == {"verdict": "halted", "reason": "2026-12-02T07:01:02Z heal budget spent"}
    assert FakeWaiter.made == []
    assert world.state.fails() == 0


def test_lock_held_elsewhere_is_busy_and_the_counter_stays(world):
    world.state.set_fails(1)
    world.lock_path.parent.mkdir(parents=True)
    holder = hold(world.lock_path)
    try:
        assert world.tick(unhealthy()) == {"verdict": "busy"}
    finally:
        holder.close()
    assert FakeWaiter.made == []
    assert world.state.fails() == 1
    assert world.starts == []


# -- tick: verdicts ---------------------------------------------------------------------------


def test_the_waiter_is_asked_with_the_plans_parameters(world):
    world.tick(healthy(), canary_timeout=7)
    waiter = FakeWaiter.made[0]
    assert waiter.head_node == "spark-head"
    assert waiter.params["timeout"] == wd.JUDGE_SECONDS
    assert waiter.params["canary_timeout"] == 7.0
    assert waiter.params["busy_ok"] is True
    assert waiter.params["workers"] == [{"ssh": "spark@198.18.1.11", "container": "glm53-tf-r1",
                                         "node": "spark-worker"}]


def test_a_short_tick_keeps_time_for_the_reads_after_the_canary(world):
    # tick_timeout 9: a third each for the state checks and the busy-or-wedged reads, the canary
    # gets the rest (asked for 30 s, it would have run the tick past its timeout).
    world.tick(healthy(), canary_timeout=30, tick_timeout=9)
    waiter = FakeWaiter.made[0]
    assert waiter.params["timeout"] == 3.0 and waiter.params["canary_timeout"] == 3.0
    assert waiter.params["busy_read_timeout"] == 3.0


def test_healthy_resets_the_counter_and_logs_healthy_again(world):
    world.state.set_fails(2)
    assert world.tick(healthy()) == {"verdict": "healthy", "reason": None}
    assert world.state.fails() == 0
    assert "watch: healthy again after 2 unhealthy tick(s)" in world.log()


def test_healthy_with_no_failures_writes_no_log(world):
    assert world.tick(healthy(busy=True)) == {"verdict": "healthy", "reason": "busy, counters advancing"}
    assert world.log() == ""


def test_loading_logs_and_does_not_count(world):
    result = {"ready": False, "health": None, "ranks": [rank0(started_at=STARTED_AT)]}
    out = world.tick((result, "not ready"))
    assert out["verdict"] == "loading"
    assert world.state.fails() == 0
    assert "watch: loading: rank 0 started 60 s ago" in world.log()


def test_unhealthy_counts_and_logs_the_brief_reason(world):
    out = world.tick(unhealthy())
    assert out == {"verdict": "unhealthy", "reason": wd.brief(UNHEALTHY_MESSAGE), "fails": 1}
    assert world.state.fails() == 1
    log = world.log()
    assert "watch: unhealthy tick 1 of 3: not ready: rank 0 (glm53-tf-r0 on spark-head) exited" in log
    assert "last lines" not in log and "Traceback" not in log


def test_three_unhealthy_ticks_heal_once(world):
    assert world.tick(unhealthy())["verdict"] == "unhealthy"
    assert world.tick(unhealthy())["verdict"] == "unhealthy"
    assert world.starts == []
    out = world.tick(unhealthy())
    assert out["verdict"] == "healed"
    assert out["detail"] == "READY 4 slots in 95 s"
    assert world.starts == [{"by": "watchdog heal", "lock_held": True, "lock_passed": True}]
    # Evidence first, from the cluster the heal made, then closed; the lock let go after.
    assert len(world.evidence) == 1 and world.evidence[0]["fails"] == 3
    assert world.evidence[0]["stamp"] == "2026-12-02T07:01:02Z"
    assert [c.closed for c in FakeCluster.made] == [True]
    assert not st.Lock(str(world.lock_path)).held_elsewhere()
    heals = world.state.heals()
    assert len(heals) == 1
    assert heals[0]["result"] == "ready"
    assert heals[0]["at"] == NOW and heals[0]["utc"] == "2026-12-02T07:01:02Z"
    assert heals[0]["detail"] == "READY 4 slots in 95 s"
    assert heals[0]["reason"] == wd.brief(UNHEALTHY_MESSAGE)
    assert heals[0]["evidence"].endswith("2026-12-02T070102Z")
    assert world.state.fails() == 0
    log = world.log()
    assert "ALERT: healing after 3 unhealthy ticks" in log
    assert "heal: READY 4 slots in 95 s" in log
    # The next unhealthy tick starts a new count: no second heal on its heels.
    assert world.tick(unhealthy()) == {"verdict": "unhealthy", "reason": wd.brief(UNHEALTHY_MESSAGE), "fails": 1}
    assert len(world.starts) == 1


def test_the_threshold_is_the_settings(world):
    assert world.tick(unhealthy(), fails=1)["verdict"] == "healed"


def test_a_failed_heal_alerts_and_records_failed(world):
    world.start_result = {"ok": False, "busy": False, "msg": "rank 1 on spark-worker could not be started"}
    world.state.set_fails(2)
    out = world.tick(unhealthy())
    assert out["verdict"] == "heal-failed"
    assert world.state.heals()[-1]["result"] == "failed"
    assert world.state.fails() == 0
    assert "ALERT: heal failed: rank 1 on spark-worker could not be started" in world.log()


def test_a_stop_between_judgment_and_lock_wins(world):
    world.state.set_fails(2)
    FakeWaiter.during_run = lambda: world.state.disable("stop (stop.yml)")
    assert world.tick(unhealthy()) == {"verdict": "disabled"}
    assert world.starts == [] and world.evidence == [] and world.state.heals() == []
    assert [c.closed for c in FakeCluster.made] == [True]
    assert not st.Lock(str(world.lock_path)).held_elsewhere()


def test_a_start_taking_the_lock_during_the_judgment_makes_the_heal_stand_down(world):
    world.state.set_fails(2)
    holders = []

    def take():
        world.lock_path.parent.mkdir(parents=True, exist_ok=True)
        holders.append(hold(world.lock_path))

    FakeWaiter.during_run = take
    try:
        assert world.tick(unhealthy()) == {"verdict": "busy"}
    finally:
        holders[0].close()
    assert world.starts == [] and world.state.heals() == []
    assert "watch: stand down: a start, stop or heal took the lock" in world.log()


def test_a_spent_budget_halts_without_a_start(world):
    world.state.add_heal({"at": NOW - 100, "result": "ready"})
    world.state.add_heal({"at": NOW - 200, "result": "ready"})
    world.state.set_fails(2)
    out = world.tick(unhealthy(), heals_per_hour=2)
    assert out["verdict"] == "halted"
    assert "heal budget spent (2 heal(s) in the last hour, at most 2)" in out["reason"]
    assert world.starts == [] and world.evidence == [] and FakeCluster.made == []
    assert "heal budget spent" in world.state.halted()
    assert (world.tmp / "state" / st.HALTED).is_file()
    alerts = [line for line in world.log().splitlines() if " ALERT: " in line]
    assert len(alerts) == 1 and "budget" in alerts[0]
    assert len(world.state.heals()) == 2
    # From now on the tick stands down until an operator's start clears the halt.
    assert world.tick(unhealthy())["verdict"] == "halted"


def test_heals_older_than_an_hour_do_not_spend_the_budget(world):
    world.state.add_heal({"at": NOW - 3700, "result": "ready"})
    world.state.add_heal({"at": NOW - 100, "result": "ready"})
    world.state.set_fails(2)
    assert world.tick(unhealthy(), heals_per_hour=2)["verdict"] == "healed"
    assert len(world.starts) == 1


def test_fatal_halts_and_alerts_without_a_start(world):
    out = world.tick(fatal())
    assert out["verdict"] == "fatal"
    assert out["reason"] == "the engine reports a fatal error: CUDA error: an illegal memory access"
    assert world.starts == [] and FakeCluster.made == []
    assert world.state.halted().endswith("fatal: the engine reports a fatal error: CUDA error: an illegal memory access")
    assert "ALERT: the engine reports a fatal error: CUDA error: an illegal memory access: no heal" in world.log()
    assert world.state.fails() == 0
    assert world.tick(healthy())["verdict"] == "halted"


# -- alerts -----------------------------------------------------------------------------------


def test_the_alert_command_receives_the_message(world, tmp_path):
    out_file = tmp_path / "alerts.txt"
    command = [sys.executable, "-c", "import sys; open(%r, 'a').write(sys.argv[1])" % str(out_file)]
    world.tick(fatal(), alert_command=command)
    alert_line = [line for line in world.log().splitlines() if " ALERT: " in line][0]
    assert out_file.read_text() == alert_line.split(" ALERT: ", 1)[1]
    assert out_file.read_text().startswith("the engine reports a fatal error")
    assert "alert command failed" not in world.log()


def test_a_failing_alert_command_is_logged(world):
    world.tick(fatal(), alert_command=[sys.executable, "-c", "raise SystemExit(3)"])
    assert "alert command failed: exit 3" in world.log()


class Hook(object):
    """A webhook receiver on 127.0.0.1 that keeps what it was sent."""

    def __init__(self):
        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append({"path": self.path, "type": self.headers["Content-Type"], "body": body})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()
        self.url = "http://127.0.0.1:%d/hooks/T0KEN-s3cret" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def hook():
    receiver = Hook()
    yield receiver
    receiver.close()


def test_the_webhook_receives_json_and_its_url_is_never_logged(world, hook):
    world.tick(fatal(), alert_webhook=hook.url)
    assert len(hook.received) == 1
    got = hook.received[0]
    assert got["path"] == "/hooks/T0KEN-s3cret"
    assert got["type"] == "application/json"
    body = json.loads(got["body"].decode("utf-8"))
    alert_line = [line for line in world.log().splitlines() if " ALERT: " in line][0]
    assert body["text"] == alert_line
    assert body["event"] == "fatal"
    assert body["message"].startswith("the engine reports a fatal error")
    assert body["host"] == socket.gethostname()
    log = world.log()
    assert "T0KEN" not in log and hook.url not in log and "127.0.0.1:%d" % hook.server.server_address[1] not in log
    assert "webhook failed" not in log


def test_a_failing_webhook_is_logged_without_its_url(world):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    url = "http://127.0.0.1:%d/hooks/T0KEN-s3cret" % port
    world.tick(fatal(), alert_webhook=url)
    log = world.log()
    assert "alert webhook failed: URLError" in log
    assert "T0KEN" not in log and str(port) not in log


def test_the_heal_alert_goes_to_the_webhook_too(world, hook):
    world.state.set_fails(2)
    world.tick(unhealthy(), alert_webhook=hook.url)
    events = [json.loads(r["body"].decode("utf-8"))["event"] for r in hook.received]
    assert events == ["heal"]


# -- watch_for ----------------------------------------------------------------------------------


class Clock(object):
    def __init__(self, start=1000.0):
        self.now = start
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


def fake_ticks(monkeypatch, clock, takes=2.0, raises=False):
    seen = []

    def tick(config, settings, state, now):
        seen.append(now())
        clock.now += takes
        if raises:
            raise RuntimeError("boom")
        return {"verdict": "healthy", "at": seen[-1]}

    monkeypatch.setattr(wd, "tick", tick)
    return seen


def test_watch_for_ticks_every_interval_within_the_window(world, monkeypatch, tmp_path):
    clock = Clock()
    seen = fake_ticks(monkeypatch, clock)
    lock = tmp_path / "state" / "watch.lock"
    outcomes = wd.watch_for(world.config, {}, world.state, 60, 15, str(lock), clock=clock, sleep=clock.sleep)
    assert seen == [1000.0, 1015.0, 1030.0, 1045.0]
    assert [o["at"] for o in outcomes] == seen
    assert clock.sleeps == [13.0, 13.0, 13.0]  # the interval less the tick's own time
    assert st.Lock(str(lock)).acquire(0)  # the runner's lock is let go


def test_watch_for_a_slow_tick_does_not_sleep_negative(world, monkeypatch, tmp_path):
    clock = Clock()
    seen = fake_ticks(monkeypatch, clock, takes=20.0)
    wd.watch_for(world.config, {}, world.state, 60, 15, str(tmp_path / "watch.lock"), clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [0.0, 0.0, 0.0]
    assert len(seen) == 4


def test_watch_for_with_an_interval_past_the_window_ticks_once(world, monkeypatch, tmp_path):
    clock = Clock()
    seen = fake_ticks(monkeypatch, clock)
    wd.watch_for(world.config, {}, world.state, 60, 60, str(tmp_path / "watch.lock"), clock=clock, sleep=clock.sleep)
    assert seen == [1000.0]
    assert clock.sleeps == []


def test_watch_for_returns_nothing_when_another_runner_holds_its_lock(world, monkeypatch, tmp_path):
    clock = Clock()
    seen = fake_ticks(monkeypatch, clock)
    lock = tmp_path / "watch.lock"
    holder = hold(lock)
    try:
        assert wd.watch_for(world.config, {}, world.state, 60, 15, str(lock), clock=clock, sleep=clock.sleep) == []
    finally:
        holder.close()
    assert seen == [] and clock.sleeps == []


def test_watch_for_lets_its_lock_go_when_a_tick_raises(world, monkeypatch, tmp_path):
    clock = Clock()
    fake_ticks(monkeypatch, clock, raises=True)
    lock = tmp_path / "watch.lock"
    with pytest.raises(RuntimeError):
        wd.watch_for(world.config, {}, world.state, 60, 15, str(lock), clock=clock, sleep=clock.sleep)
    assert not st.Lock(str(lock)).held_elsewhere()


def test_watch_for_runs_real_ticks(world, tmp_path):
    world.state.disable("stop")
    clock = Clock()
    outcomes = wd.watch_for(world.config, {}, world.state, 30, 15, str(tmp_path / "watch.lock"), clock=clock,
                            sleep=clock.sleep)
    assert outcomes == [{"verdict": "disabled"}, {"verdict": "disabled"}]
    assert clock.sleeps == [15.0]
