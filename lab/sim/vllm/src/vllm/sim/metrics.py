"""The engine's counters and their Prometheus text at /metrics, with vLLM's names.

vLLM (V1 engine) exports its series under ``vllm:``, each labelled ``engine`` and
``model_name`` (the first --served-model-name), through prometheus_client: counters end
in ``_total`` and come with a ``_created`` sample, histograms have ``_bucket{le=...}``,
``_count`` and ``_sum``, values are floats ("1.0"). The buckets below are V1's.
The pre-V1 ``vllm:gpu_cache_usage_perc`` is gone from current vLLM, so it is not here
either: a dashboard that needs it must fail in the lab as on a Spark.
"""

import threading
import time

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0)
FINISH_REASONS = ("stop", "length", "abort")


def number(value):
    """prometheus_client's float text."""
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


class Histogram(object):
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.total = 0.0

    def observe(self, value):
        self.count += 1
        self.total += value
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[index] += 1

    def samples(self, name, labels):
        out = ["%s_bucket{%s,le=\"%s\"} %s" % (name, labels, number(bound), number(count))
               for bound, count in zip(self.buckets, self.counts)]
        out.append("%s_bucket{%s,le=\"+Inf\"} %s" % (name, labels, number(self.count)))
        out.append("%s_count{%s} %s" % (name, labels, number(self.count)))
        out.append("%s_sum{%s} %s" % (name, labels, number(self.total)))
        return out


class Stats(object):
    """What the scheduler counts; one lock, as the engine updates it from many threads."""

    def __init__(self, kv_tokens):
        self.lock = threading.Lock()
        self.created = time.time()
        self.kv_tokens = max(kv_tokens, 1)
        self.running = 0
        self.waiting = 0
        self.kv_used = 0  # tokens the running sequences hold in the KV cache
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.success = dict((reason, 0) for reason in FINISH_REASONS)
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(LATENCY_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.queue = Histogram(LATENCY_BUCKETS)

    def kv_usage(self):
        return min(float(self.kv_used) / self.kv_tokens, 1.0)

    def render(self, model_name):
        labels = 'engine="0",model_name="%s"' % model_name.replace("\\", "\\\\").replace('"', '\\"')
        out = []

        def family(name, kind, helptext, samples):
            out.append("# HELP %s %s" % (name, helptext))
            out.append("# TYPE %s %s" % (name, kind))
            out.extend(samples)

        def counter(name, helptext, value, extra=""):
            family(name + "_total", "counter", helptext, ["%s_total{%s%s} %s" % (name, labels, extra, number(value))])
            out.append("%s_created{%s%s} %s" % (name, labels, extra, number(self.created)))

        with self.lock:
            family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                   ["vllm:num_requests_running{%s} %s" % (labels, number(self.running))])
            family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                   ["vllm:num_requests_waiting{%s} %s" % (labels, number(self.waiting))])
            family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                   ["vllm:kv_cache_usage_perc{%s} %s" % (labels, number(self.kv_usage()))])
            counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", self.preemptions)
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens)
            counter("vllm:generation_tokens", "Number of generation tokens processed.", self.generation_tokens)
            out.append("# HELP vllm:request_success_total Count of successfully processed requests.")
            out.append("# TYPE vllm:request_success_total counter")
            for reason in FINISH_REASONS:
                out.append('vllm:request_success_total{%s,finished_reason="%s"} %s'
                           % (labels, reason, number(self.success[reason])))
            for name, helptext, histogram in (
                    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.ttft),
                    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self.itl),
                    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", self.e2e),
                    ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                     self.queue)):
                family(name, "histogram", helptext, histogram.samples(name, labels))
        return "\n".join(out) + "\n"
