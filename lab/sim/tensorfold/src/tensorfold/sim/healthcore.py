"""/health and /metrics bookkeeping (kit patch 0150), rank 0.

``Health`` counts what ``/health`` and ``/metrics`` show. The kit build adds a
request's prompt and completion tokens when it ends; patch 9003 (the lp9001
``cuda/health.py``) counts them live, by overriding ``first_token`` and
``tokens``. ``finish`` adds whatever was not counted yet, so totals agree.

``inflight``, ``oldest_s``, ``stalled`` and ``tensorfold_requests_inflight`` are
the running completions ("Completion requests running now"): a request waiting
for a slot is not in them until ``admit``; the b9 body has no field for waiting ones.
"""

import threading
import time

from tensorfold.sim import env

COUNTERS = (
    ("requests_total", "Completion requests finished (errors included)."),
    ("request_errors_total", "Completion requests that failed."),
    ("requests_rejected_total", "Requests refused before running (HTTP 4xx)."),
    ("prompt_tokens_total", "Prompt tokens of finished requests."),
    ("cached_tokens_total", "Prompt tokens served from the session/prefix cache."),
    ("completion_tokens_total", "Completion tokens produced."),
    ("decode_rounds_total", "Decode rounds (verify steps) run."),
    ("decode_seconds_total", "Seconds spent decoding."),
    ("prefill_seconds_total", "Seconds spent in prefill."),
)
GAUGES = (
    ("requests_inflight", "Completion requests running now."),
    ("requests_stalled", "Running requests past the stall limit (GLM53_TF_STALL_S)."),
    ("engine_fatal", "1 once the engine raised a fatal error (restart the ranks)."),
    ("uptime_seconds", "Seconds since the server started."),
)


def _number(value):
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return "%.6f" % value


class Health(object):
    def __init__(self):
        mode = env.text("GLM53_TF_HEALTH", "basic").lower()
        self.mode = "strict" if mode == "strict" else "basic"
        self.stall_s = env.number("GLM53_TF_STALL_S", 0.0)
        self.stall_tps = env.number("GLM53_TF_STALL_PREFILL_TPS", 200.0)
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.jobs = {}
        self.last_end = None
        self.fatal = None
        self.totals = dict((name, 0) for name, text in COUNTERS)
        for name in ("decode_seconds_total", "prefill_seconds_total"):
            self.totals[name] = 0.0

    # -- a request's life
    def start(self, job):
        """The request arrived; it may wait for a slot before ``admit``."""
        with self.lock:
            job.t_start = job.t_last = time.monotonic()
            job.counted_prompt = job.counted_completion = 0
            job.running = False
            self.jobs[id(job)] = job

    def admit(self, job):
        """The request got a slot: it runs from now on (the stall clock starts here)."""
        with self.lock:
            job.t_last = time.monotonic()
            job.running = True

    def running(self):
        return [job for job in self.jobs.values() if job.running]

    def first_token(self, job):
        """The request produced its first token (prefill done)."""
        job.t_last = time.monotonic()

    def tokens(self, job, count):
        """``count`` more completion tokens."""
        job.t_last = time.monotonic()

    def finish(self, job, error=None):
        with self.lock:
            self.jobs.pop(id(job), None)
            self.last_end = time.monotonic()
            totals = self.totals
            totals["requests_total"] += 1
            if error:
                totals["request_errors_total"] += 1
            totals["prompt_tokens_total"] += job.prompt - job.counted_prompt
            totals["completion_tokens_total"] += job.completion - job.counted_completion
            job.counted_prompt, job.counted_completion = job.prompt, job.completion
            totals["cached_tokens_total"] += job.cached
            totals["decode_rounds_total"] += job.rounds
            totals["decode_seconds_total"] += job.decode_s
            totals["prefill_seconds_total"] += job.prefill_s

    def reject(self):
        with self.lock:
            self.totals["requests_rejected_total"] += 1

    def set_fatal(self, text):
        """The first fatal error stays until the ranks restart."""
        with self.lock:
            if self.fatal is None:
                self.fatal = str(text)[:500]

    def check_switch(self):
        if self.fatal is None and env.switch(env.FATAL):
            self.set_fatal("RuntimeError: CUDA error: an illegal memory access was encountered "
                           "(simulated: %s/%s is present)" % (env.switch_dir(), env.FATAL))

    # -- views
    def stalled(self, now):
        if self.stall_s <= 0:
            return []
        out = []
        for job in self.running():
            allowed = self.stall_s
            if job.first is None:
                allowed += job.prompt / max(self.stall_tps, 1e-9)
            quiet = now - job.t_last
            if quiet > allowed:
                out.append({"prompt": job.prompt, "quiet_s": round(quiet, 1), "allowed_s": round(allowed, 1)})
        return out

    def status(self):
        """(HTTP status, body) of /health."""
        self.check_switch()
        now = time.monotonic()
        with self.lock:
            jobs = self.running()
            oldest = max([now - job.t_start for job in jobs] or [0.0])
            idle = None if self.jobs or self.last_end is None else round(now - self.last_end, 1)
            stalled = self.stalled(now)
            body = {
                "ok": self.fatal is None and not stalled,
                "mode": self.mode,
                "uptime_s": round(now - self.started, 1),
                "inflight": len(jobs),
                "oldest_s": round(oldest, 1),
                "idle_s": idle,
                "requests": self.totals["requests_total"],
                "errors": self.totals["request_errors_total"],
            }
            if self.fatal is not None:
                body["fatal"] = self.fatal
            if stalled:
                body["stalled"] = stalled
        code = 503 if self.mode == "strict" and not body["ok"] else 200
        return code, body

    def metrics(self, model):
        self.check_switch()
        now = time.monotonic()
        label = '{model="%s"}' % model.replace("\\", "\\\\").replace('"', '\\"')
        with self.lock:
            values = dict(self.totals)
            values["requests_inflight"] = len(self.running())
            values["requests_stalled"] = len(self.stalled(now))
            values["engine_fatal"] = 1 if self.fatal is not None else 0
            values["uptime_seconds"] = now - self.started
        lines = []
        for kind, table in (("counter", COUNTERS), ("gauge", GAUGES)):
            for name, text in table:
                metric = "tensorfold_" + name
                lines.append("# HELP %s %s" % (metric, text))
                lines.append("# TYPE %s %s" % (metric, kind))
                lines.append("%s%s %s" % (metric, label, _number(values[name])))
        return "\n".join(lines) + "\n"
