"""The operations playbooks and the watchdog end to end on the lab, path tensorfold: a deploy,
then the role watchdog's real schedule (a systemd user timer, every 5 s here) ticking the shipped
program against faults the lab makes - a killed rank, a silent hang, a fatal engine, a paused
(loading) rank 0, every slot busy, stop.yml, ten kills in a row. Asserted: what an operator sees -
the ranks and their start times, the UTC log, heals.json, the evidence files, the alerts, the
timer's own journal, and the role's changes.

Cost: one deployment, then the watchdog's real timer ticking every 5 s for the whole module, and
a heal (a restart of both ranks) for each fault that must be healed."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest

from lab_faults import HEAD, WORKER, sh

SITE = "playbooks/site.yml"
WATCHDOG = "playbooks/watchdog.yml"
TF = {"path": "tensorfold"}
STATE = "/home/spark/.local/state/glm53-tf-prod"
LOG = f"{STATE}/tf-prod.log"
SESSIONS = "/home/spark/.cache/glm53-tf/sessions"
ALERTS = "/home/spark/alerts.log"
UNITS = "/home/spark/.config/systemd/user"
API = "http://127.0.0.1:8000"
INTERVAL = 5
# The lab's settings: ticks every 5 s, a 3 s canary (the simulated engine answers in 0.3 s), a
# grace that covers every start of this module, and a budget no fault test reaches.
SETTINGS = {
    "watchdog_interval": INTERVAL,
    "watchdog_canary_timeout": 3,
    "watchdog_grace_seconds": 600,
    "watchdog_heals_per_hour": 60,
    "watchdog_alert_command": ["sh", "-c", f"echo \"$0\" >> {ALERTS}"],
}
# How long to wait for a heal: three unhealthy ticks, a heal's start (seconds on the lab) and
# slack for a loaded machine, where a tick itself takes seconds. A bound on the wait, never a
# measurement: how fast the watchdog heals is benchmarks/watchdog_mttr.py's table.
HEAL_DEADLINE = 3 * INTERVAL + 120


def spark(node, script, check=True):
    # As a login of the deploy user would have it (docker exec sets no XDG_RUNTIME_DIR).
    return sh(node, f"export XDG_RUNTIME_DIR=/run/user/$(id -u); {script}", user="spark", check=check)


def started_at(node, name):
    run = spark(node, f"docker inspect -f '{{{{.State.StartedAt}}}} {{{{.State.Running}}}}' {name}", check=False)
    return run.stdout.strip() if run.returncode == 0 else None


def ranks():
    return started_at(HEAD, "glm53-tf-r0"), started_at(WORKER, "glm53-tf-r1")


def log_lines():
    return spark(HEAD, f"cat {LOG} 2>/dev/null || true").stdout.splitlines()


def halted():
    return spark(HEAD, f"cat {STATE}/halted 2>/dev/null || true").stdout.strip()


def heals():
    text = spark(HEAD, f"cat {STATE}/heals.json 2>/dev/null || echo []").stdout
    return json.loads(text or "[]")


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what} did not happen within {timeout} s; log tail:\n" + "\n".join(log_lines()[-25:]))


def tick_records(mark):
    """The watchdog service's runs since `mark` (journal time, 'YYYY-MM-DD HH:MM:SS'), as the
    timer ran them: each prints its verdict and reason as one JSON line."""
    out = spark(HEAD, f"journalctl --user -u glm53-watchdog.service --since {shlex.quote(mark)} -o cat "
                      "--no-pager 2>/dev/null | grep '\"verdict\"' || true").stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def ticks_since(mark):
    return [record["verdict"] for record in tick_records(mark)]


def node_now():
    return spark(HEAD, "date -u '+%Y-%m-%d %H:%M:%S'").stdout.strip()


def ticks_after_the_heal(mark, known):
    """The verdicts the timer's journal has after its last `healed` since `mark`, or None while
    it has no more than the `known` ones (an earlier test's heal can fall in the mark's second)."""
    verdicts = ticks_since(mark)
    if verdicts.count("healed") <= known:
        return None
    return verdicts[len(verdicts) - verdicts[::-1].index("healed"):]


def heal_once(fault, deadline=HEAL_DEADLINE):
    """Apply `fault`, wait for exactly one new heal to reach READY and for the timer's journal to
    show the healing tick and a tick after it (which must not heal again); (the heal, ranks
    before). The journal is waited for, never read once: journald runs in the node, which a
    busy controller starves, so a tick's line can reach it seconds after heals.json does."""
    mark = node_now()
    known = ticks_since(mark).count("healed")
    before_heals, before = len(heals()), ranks()
    fault()
    healed = wait_for(lambda: [h for h in heals()[before_heals:] if h.get("result") == "ready"], deadline,
                      "a heal to READY")
    try:
        wait_for(lambda: ticks_after_the_heal(mark, known), 3 * INTERVAL + 60, "a tick after the heal")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe timer's verdicts since {mark}: {ticks_since(mark)}") from None
    new = heals()[before_heals:]
    assert len(new) == 1, new
    after = ranks()
    assert after[0] and after[1] and after[0].endswith("true") and after[1].endswith("true"), after
    assert after[0] != before[0] and after[1] != before[1], (before, after)
    return healed[0], before


def settle():
    """Wait for a tick that starts now and judges the engine healthy (after a heal, if one was due)."""
    mark = node_now()
    wait_for(lambda: "healthy" in ticks_since(mark), HEAL_DEADLINE, "a healthy tick")


def evidence_files(heal):
    return set(spark(HEAD, f"ls {shlex.quote(heal['evidence'])}").stdout.split())


@pytest.fixture(scope="module")
def watched(lab):
    """A tensorfold deploy with the watchdog ticking every 5 s (linger enabled by the admin, as
    the role's message asks where polkit refuses it to the user)."""
    from conftest import PlaybookRunner  # pylint: disable=import-outside-toplevel
    runner = PlaybookRunner(Path(lab.inventory), "watchdog-module")
    runner("playbooks/docker_runtime.yml", extravars={"ansible_user": "admin", "docker_runtime_user": "spark"},
           cmdline="-b")
    runner(SITE, extravars=TF)
    sh(HEAD, "loginctl enable-linger spark")
    runner(WATCHDOG, extravars=SETTINGS)
    yield runner
    runner(WATCHDOG, extravars={"watchdog_state": "absent"})


def test_a_killed_rank_1_is_healed_within_three_ticks_and_a_start_with_its_evidence(watched):
    heal, _before = heal_once(lambda: spark(WORKER, "docker kill glm53-tf-r1 >/dev/null"))
    lines = log_lines()
    alerts = [i for i, line in enumerate(lines)
              if re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ALERT: healing after 3 unhealthy ticks: rank", line)]
    assert alerts, lines[-20:]
    # Within three ticks: the heal came on the third unhealthy tick in a row, counted 1, 2, 3.
    counted = [re.search(r"watch: unhealthy tick (\d+) of 3", line) for line in lines[:alerts[-1]]]
    assert [m.group(1) for m in counted if m][-3:] == ["1", "2", "3"], lines[-20:]
    assert "start (watchdog heal): path tensorfold" in "\n".join(lines[alerts[-1]:])
    assert "glm53-tf-r1 on spark-worker" in heal["reason"] and "exited" in heal["reason"]
    files = evidence_files(heal)
    assert {"rank0-spark-head.log", "rank1-spark-worker.log", "health.json", "metrics.txt", "nccl.json",
            "nodes.json", "reason.txt"} <= files, files
    nodes = json.loads(spark(HEAD, f"cat {heal['evidence']}/nodes.json").stdout)
    assert nodes["spark-worker"]["gid_tables"] and nodes["spark-worker"]["memory"]["mem_free"] > 0
    assert "glm53-tf-r1" in spark(HEAD, f"cat {ALERTS}").stdout
    # The timer ran it: heal_once saw the healing tick and one after it in the timer's journal.


def test_a_killed_rank_0_is_healed(watched):
    heal, _before = heal_once(lambda: spark(HEAD, "docker kill glm53-tf-r0 >/dev/null"))
    assert "glm53-tf-r0 on spark-head" in heal["reason"]


def test_a_silent_hang_with_health_ok_is_healed_by_the_canary(watched):
    # /health stays ok and /v1/models answers; only a completion never yields a token.
    try:
        heal, _before = heal_once(
            lambda: spark(HEAD, f"mkdir -p {SESSIONS} && echo once > {SESSIONS}/lab-hang"))
    finally:
        spark(HEAD, f"rm -f {SESSIONS}/lab-hang")
    assert "canary" in heal["reason"] and "wedged" in heal["reason"], heal
    health = json.loads(spark(HEAD, f"cat {heal['evidence']}/health.json").stdout)
    assert health["ok"] is True


def test_a_loading_rank_0_within_the_grace_is_not_healed(watched):
    # Paused: the container runs, its API takes connections and never answers, as during a load.
    before_heals = len(heals())
    spark(HEAD, "docker pause glm53-tf-r0 >/dev/null")
    # A tick already under way when the pause came saw an answer, then a canary that never
    # returned: a wedged engine, rightly. The ticks that start once it is paused see a load.
    time.sleep(INTERVAL + SETTINGS["watchdog_canary_timeout"] + 2)
    mark = node_now()
    try:
        wait_for(lambda: ticks_since(mark).count("loading") >= 3, 6 * INTERVAL + 30, "three loading ticks")
    finally:
        spark(HEAD, "docker unpause glm53-tf-r0 >/dev/null")
    assert "unhealthy" not in ticks_since(mark)
    assert len(heals()) == before_heals
    # The canaries of the paused ticks are still queued in the engine; on a loaded machine the
    # next ticks may find it slow and count up to a heal. Leave the watchdog settled for the
    # next test, whichever way it goes.
    settle()


def test_every_slot_busy_on_long_requests_is_not_healed(watched):
    settle()
    before_heals, before = len(heals()), ranks()
    # Ten streamed requests for eight slots, each far longer than the ticks judged here (minutes
    # of decoding), so every canary waits its turn whatever the machine's load; the client ends
    # them once the ticks are judged (a stream's engine sees its client leave).
    body = json.dumps({"model": "glm-5.3-flash", "max_tokens": 60000, "ignore_eos": True, "stream": True,
                       "messages": [{"role": "user", "content": "count"}]})
    spark(HEAD, f"for i in $(seq 10); do nohup curl -sN -m 400 -H 'Content-Type: application/json' "
                f"-d {shlex.quote(body)} {API}/v1/chat/completions >/dev/null 2>&1 & done")
    try:
        wait_for(lambda: json.loads(spark(HEAD, f"curl -s -m 5 {API}/health").stdout).get("inflight", 0) >= 8, 30,
                 "eight requests in flight")
        mark = node_now()

        def busy_ticks():
            return [r for r in tick_records(mark) if r.get("reason") == "busy, counters advancing"]

        wait_for(lambda: len(busy_ticks()) >= 4, 8 * INTERVAL + 40, "four ticks judging the engine busy")
        records = tick_records(mark)
        busy = json.loads(spark(HEAD, f"curl -s -m 5 {API}/health").stdout)
        assert busy["inflight"] >= 8, busy  # still every slot busy: the ticks above judged a busy engine
        # No tick took the queued canary for a wedge. (On a loaded machine one tick may not reach
        # the worker over ssh within its 5 s: an unhealthy tick for that reason, never a heal - the
        # fault needs three in a row, and the heal count below proves none came.)
        assert not [r for r in records if r["verdict"] != "healthy" and "canary" in (r.get("reason") or "")], records
        assert {r["verdict"] for r in records} <= {"healthy", "unhealthy"}, records
        assert len(heals()) == before_heals and ranks() == before
    finally:
        # ([c]url: the pattern must not match the shell that runs pkill.)
        spark(HEAD, "pkill -f '[c]url -sN -m 400' || true")
    wait_for(lambda: json.loads(spark(HEAD, f"curl -s -m 5 {API}/health").stdout).get("inflight", 1) == 0, 30,
             "the slots of the ended requests freed")


def test_stop_yml_stays_stopped_for_five_ticks_and_start_yml_brings_it_back(watched):
    stop = watched("playbooks/stop.yml")
    assert spark(HEAD, f"test -e {STATE}/DISABLED && echo yes").stdout.strip() == "yes"
    assert ranks() == (None, None)
    mark = node_now()
    wait_for(lambda: len(ticks_since(mark)) >= 5, 8 * INTERVAL + 30, "five ticks")
    assert set(ticks_since(mark)) == {"disabled"}
    assert ranks() == (None, None), "a tick started a stopped engine"
    assert "no tensorfold rank remains" in stop.stdout
    start = watched("playbooks/start.yml")
    assert "READY 8 slots" in start.stdout
    assert spark(HEAD, f"test -e {STATE}/DISABLED && echo yes || echo no").stdout.strip() == "no"
    assert all(r and r.endswith("true") for r in ranks())


def test_a_fatal_engine_alerts_and_is_not_healed_until_start_yml(watched):
    before_heals = len(heals())
    spark(HEAD, f"mkdir -p {SESSIONS} && touch {SESSIONS}/lab-fatal")
    try:
        wait_for(halted, 3 * INTERVAL + 30,
                 "the fatal halt")
        mark = node_now()
        wait_for(lambda: ticks_since(mark).count("halted") >= 3, 5 * INTERVAL + 30, "three ticks after the halt")
        # (The journal's --since has whole seconds: the fatal tick itself may be in the mark's second.)
        assert set(ticks_since(mark)) <= {"fatal", "halted"}, ticks_since(mark)
        assert len(heals()) == before_heals
        assert any("ALERT:" in line and "fatal" in line and "no heal" in line for line in log_lines())
    finally:
        spark(HEAD, f"rm -f {SESSIONS}/lab-fatal")
    start = watched("playbooks/start.yml")
    assert "READY" in start.stdout
    assert spark(HEAD, f"test -e {STATE}/halted && echo yes || echo no").stdout.strip() == "no"


def test_ten_faults_in_a_row_never_overlap_and_the_budget_turns_to_alerts(watched):
    watched(WATCHDOG, extravars=dict(SETTINGS, watchdog_heals_per_hour=2))
    spark(HEAD, f"rm -f {STATE}/heals.json")
    try:
        # A fault every 4 s - quicker than three ticks and a start - until the budget is spent:
        # two heals, then the third outage turns to alerts. Bounded by time, never by a count of
        # faults: how many faults the budget takes depends on how long each heal's start runs
        # (on a loaded machine one start failed under the kills and a second took 50 s).
        faults, deadline = 0, time.monotonic() + 3 * HEAL_DEADLINE + 120
        while time.monotonic() < deadline and not halted():
            spark(WORKER, "docker kill glm53-tf-r1 >/dev/null 2>&1 || true", check=False)
            faults += 1
            time.sleep(4)
        why = wait_for(halted, 60, "the budget's halt")
        assert faults >= 10, faults
        assert "budget" in why
        assert len(heals()) == 2
        lines = [line for line in log_lines() if re.match(r"^\d{4}-", line)]
        # Never two starts at once: every heal's start ends (READY or FAILED) before the next begins.
        open_starts = 0
        for line in lines:
            if "start (watchdog heal)" in line or "start (playbooks/" in line:
                assert open_starts == 0, "two starts at once:\n" + "\n".join(lines[-40:])
                open_starts = 1
            elif re.search(r"Z (READY|START FAILED)", line):
                open_starts = 0
        assert any("ALERT:" in line and "budget" in line for line in lines)
        assert "budget" in spark(HEAD, f"cat {ALERTS}").stdout
    finally:
        watched(WATCHDOG, extravars=SETTINGS)
        watched("playbooks/start.yml")
    assert spark(HEAD, f"test -e {STATE}/halted && echo yes || echo no").stdout.strip() == "no"


def test_status_yml_shows_the_ranks_the_watchdog_and_writes_json(watched, tmp_path):
    out = tmp_path / "status.json"
    run = watched("playbooks/status.yml", extravars={"ops_status_file": str(out)})
    status = json.loads(out.read_text())
    assert status["path"] == "tensorfold" and status["health"]["status"] == 200
    assert [n["state"] for n in status["nodes"]] == ["running", "running"]
    assert status["slots"]["log"] == 8
    assert status["watchdog"]["schedule"] == "systemd" and status["watchdog"]["active"] is True
    assert all(n["mem_free"] > 0 and n["disk"][0]["free"] > 0 and n["links"] for n in status["nodes"])
    assert "spark-worker   1    glm53-tf-r1" in run.stdout


def test_the_role_reruns_unchanged_disables_the_kits_timer_and_removes_only_its_own(watched, assert_idempotent):
    # The kit's own watchdog, as its README installs it: the role turns it off (two watchdogs
    # would heal one service) and says so.
    spark(HEAD, f"mkdir -p {UNITS} && printf '[Service]\\nType=oneshot\\nExecStart=/bin/true\\n' > "
                f"{UNITS}/glm53-tf-watchdog.service && printf '[Timer]\\nOnUnitActiveSec=60s\\n[Install]\\n"
                f"WantedBy=timers.target\\n' > {UNITS}/glm53-tf-watchdog.timer && systemctl --user daemon-reload && "
                "systemctl --user enable --now glm53-tf-watchdog.timer")
    first, _second = assert_idempotent(WATCHDOG, extravars=SETTINGS)
    assert "glm53-tf-watchdog.timer" in first.stdout
    assert spark(HEAD, "systemctl --user is-enabled glm53-tf-watchdog.timer || true").stdout.strip() == "disabled"
    keep = spark(HEAD, "ls ~/.local/lib/glm53-ops ~/.config/glm53-ops").stdout
    watched(WATCHDOG, extravars={"watchdog_state": "absent"})
    assert spark(HEAD, f"ls {UNITS}/glm53-watchdog.* 2>/dev/null || true").stdout.strip() == ""
    assert spark(HEAD, "systemctl --user is-active glm53-watchdog.timer || true").stdout.strip() != "active"
    left = spark(HEAD, "ls ~/.local/lib/glm53-ops ~/.config/glm53-ops").stdout
    assert "glm53-ops" in left and "ops.json" in left and "watchdog.json" not in left, (keep, left)
    assert spark(HEAD, f"test -f {UNITS}/glm53-tf-watchdog.timer && echo kept").stdout.strip() == "kept"
    # The cron schedule: one line in the deploy user's crontab, and absent takes only that line.
    spark(HEAD, "(echo '17 3 * * * /bin/true # the operator s own job') | crontab -")
    watched(WATCHDOG, extravars=dict(SETTINGS, watchdog_schedule="cron"))
    cron = spark(HEAD, "crontab -l").stdout
    assert "glm53-ops watch --for 60" in cron and "the operator s own job" in cron
    watched(WATCHDOG, extravars={"watchdog_state": "absent"})
    cron = spark(HEAD, "crontab -l").stdout
    assert "glm53-ops" not in cron and "the operator s own job" in cron
    watched(WATCHDOG, extravars=SETTINGS)
