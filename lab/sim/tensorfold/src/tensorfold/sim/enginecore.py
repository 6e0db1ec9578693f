"""The simulated engine: start-up (rendezvous, slot rule, load, boot lines) and
generation on rank 0 with rank 1 answering over the link.

Slots come from the memory each rank has at load, the coupling the collection's
eviction step exists for: on a GB10 the page cache counts as used memory when the
real engine fits its slots at load (kit §5, load-time slot rule). Each rank measures,
with mincore, how much of its weight files (>= 16 MiB under MODEL_PATH and DRAFTER)
sits in the page cache, asks the driver for free memory and fits its slots
(sim/memory.py); both serve the fewest that fit on either rank. Then each rank reads
every weight file once, as a load does, so a start that follows without eviction
finds them in the page cache.
"""

import collections
import json
import os
import threading
import time

from tensorfold.sim import decoding, env, link as linkmod, memory, model, residency

GB = 1e9
GIB = float(1 << 30)
KV_BYTES = {"fp8": 7664, "bf16": 15328}


class EngineFatal(RuntimeError):
    """The engine failed earlier; completions are refused until a restart."""


class Job(object):
    """One completion request on rank 0."""

    def __init__(self, kind, prompt_ids, max_tokens, explicit_max, seed, temperature, thinking, effort):
        self.kind = kind
        self.prompt_ids = prompt_ids
        self.prompt = len(prompt_ids)
        self.max_tokens = max_tokens
        self.explicit_max = explicit_max
        self.seed = seed
        self.temperature = temperature
        self.thinking = thinking
        self.effort = effort
        self.stop = []
        self.ignore_eos = False
        self.min_tokens = 0
        self.logprobs = None
        self.knobs = {}
        self.stats_mode = None
        self.cached = 0
        self.completion = 0
        self.rounds = 0
        self.decode_s = 0.0
        self.prefill_s = 0.0
        self.queue_s = 0.0
        self.first = None
        self.first_s = None
        self.finish = None
        self.slot = None
        self.pages = 0
        self.kv_free = None
        self.started_wall = time.time()
        self.t_start = self.t_last = time.monotonic()
        self.counted_prompt = self.counted_completion = 0
        self.drafted = 0
        self.series = {"keeps": [], "depths": [], "drafters": [], "arms": [], "stats": []}


class PrefixCache(object):
    """Recent prompts; a new prompt's longest common prefix with one is "cached"."""

    def __init__(self, size=64):
        self.prompts = collections.deque(maxlen=size)
        self.lock = threading.Lock()

    def lookup(self, ids):
        best = 0
        with self.lock:
            for prompt in self.prompts:
                common = 0
                for left, right in zip(prompt, ids):
                    if left != right:
                        break
                    common += 1
                best = max(best, common)
        return min(best, max(len(ids) - 1, 0))

    def add(self, ids):
        with self.lock:
            self.prompts.append(tuple(ids))


def served_name(model_path):
    """Default --name: the repository of an HF snapshot path, else the directory name."""
    parts = os.path.normpath(model_path).split(os.sep)
    for part in parts:
        if part.startswith("models--"):
            return part.split("--")[-1]
    return parts[-1] or "model"


class Engine(object):
    """Both ranks' engine. ``boot()`` runs the start; rank 0 then serves ``generate``."""

    def __init__(self, args, launched):
        self.args = args
        self.rank = args.rank
        self.launched = launched  # time.time() of the launch (GLM53_TF_LAUNCH_T0 or our start)
        self.started = time.monotonic()
        self.name = args.name or served_name(args.model_path)
        self.context = args.context or 2051
        self.max_tokens = args.max_tokens or 32768
        self.requested = env.number("GLM53_TF_BATCH", 1, int)
        self.reserve_gb = env.number("GLM53_TF_BATCH_RESERVE_GB", 4.0)
        self.admit_gb = env.number("GLM53_TF_BATCH_ADMIT_GB", 1.0)
        self.pool_tokens = env.number("GLM53_TF_KV_POOL_TOKENS", 0, int)
        self.session_gib = env.number("GLM53_TF_SESSION_GIB", 0.0)
        self.slots = 1
        self.memory = None
        self.batcher = None
        self.link = None
        self.health = None
        self.prefix = PrefixCache()
        self.request_log = env.text("GLM53_TF_REQUEST_LOG")
        self._log_lock = threading.Lock()
        self.drafts = self._drafts()
        self.loaded_in = 0.0
        self.stop = set()

    # -- start-up ---------------------------------------------------------------
    def boot_log(self, what):
        env.log("[boot] r%d +%.1fs %s" % (self.rank, time.time() - self.launched, what))

    def _drafts(self):
        args = self.args
        if args.no_drafts:
            return "off"
        if args.drafter:
            return "dflash" if os.path.isdir(args.drafter) else "missing"
        return "mtp"

    def roots(self):
        return [path for path in (self.args.model_path, self.args.drafter) if path]

    def check_model(self):
        path = self.args.model_path
        if not os.path.isfile(os.path.join(path, "config.json")):
            env.log("[tensorfold] rank %d: %s has no config.json (are the weights in this node's HF cache?)"
                    % (self.rank, path))
            return False
        if self.args.drafter and not os.path.isdir(self.args.drafter):
            env.log("[tensorfold] drafter %s not found on rank %d: serving without it (tokens a round ~1.0)"
                    % (self.args.drafter, self.rank))
        return True

    def boot(self):
        """Start this rank; returns False when the start failed (exit 1)."""
        if env.flag("GLM53_LAB_CONTAINER_LINE", True):
            # The kit's entrypoint prints this one; an entrypoint that does sets the knob to 0.
            self.boot_log("container started")
        if self.requested < 1:
            env.log("[tensorfold] GLM53_TF_BATCH=%d: must be 1 or more" % self.requested)
            return False
        if not self.check_model() or not linkmod.check_ifname(self.rank):
            return False
        try:
            self.stop = self.stop_ids()
        except ValueError as exc:
            env.log("[tensorfold] rank %d: %s" % (self.rank, exc))
            return False
        measured = residency.measure(self.roots())
        env.log("[tensorfold] rank %d: page cache holds %.0f%% of the weights before the load (%d file(s), "
                "%.2f GiB; mincore)" % (self.rank, 100 * measured.fraction, measured.files, measured.size / GIB))
        self.memory = memory.measure(self.requested, self.session_gib, measured.footprint, measured.resident)
        env.log(memory.memory_line(self.rank, self.memory, self.requested))
        hello = {"t": "hello", "rank": 1, "resident": measured.fraction, "memory": self.memory}
        try:
            if self.rank == 0:
                sock, reader, hello = linkmod.serve_rendezvous(self.args.master, self.args.master_port,
                                                               env.rendezvous_timeout())
            else:
                sock, reader = linkmod.join_rendezvous(self.args.master, self.args.master_port,
                                                       env.rendezvous_timeout()), None
        except linkmod.RendezvousError:
            return False
        self.link = linkmod.Link(sock, self.rank, env.heartbeat_seconds(), env.collective_timeout(), reader=reader)
        if not self.agree_slots(hello):
            return False
        residency.read_all(self.roots())
        self.boot_log("weights: %s GB on the GPU (%d file(s) read from %s%s; %.0f%% were in the page cache "
                      "before the load)" % (_gb(measured.size), measured.files, self.args.model_path,
                                            " and the drafter" if self.drafts == "dflash" else "",
                                            100 * measured.fraction))
        self.log_layout()
        wait = self.started + env.boot_seconds() - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.loaded_in = time.monotonic() - self.started
        return True

    def agree_slots(self, hello):
        """Both ranks agree on the slot count: rank 0 decides, the fewest that fit on either."""
        try:
            self.link.sock.settimeout(env.rendezvous_timeout())
            if self.rank == 1:
                self.link.send(hello)
                welcome = self.link.recv()
                if not welcome or welcome.get("t") != "welcome":
                    raise OSError("no welcome from rank 0")
                self.slots = int(welcome["slots"])
            else:
                ranks = [self.memory, hello.get("memory")]
                self.slots, short = memory.agree(self.requested, ranks)
                if short is not None:
                    env.log(memory.shortfall_line(self.requested, self.slots, self.reserve_gb, self.session_gib,
                                                  short, ranks[short]))
                self.link.send({"t": "welcome", "slots": self.slots})
            self.link.sock.settimeout(None)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            linkmod.log_rank(self.rank, "torch.distributed.DistNetworkError: rendezvous with rank %d failed: %s"
                             % (1 - self.rank, exc))
            return False
        return True

    def kv_bytes(self):
        if env.text("GLM53_TF_LATENT_KV", "0") == "1":
            return KV_BYTES.get(env.text("GLM53_TF_KV_DTYPE", "bf16"), KV_BYTES["bf16"])
        return 400000

    def log_layout(self):
        """The engine's layout lines (kit AGENTS §4), on both ranks like the real one."""
        hcas = env.text("NCCL_IB_HCA")
        mark = env.text("GLM53_TF_ROCE_MARK")
        if env.text("GLM53_TF_COMM_BACKEND", "nccl") == "roce":
            if mark and os.path.exists(mark):
                env.log("[tensorfold] roce: a RoCE failure marker is present (%s); serving on NCCL" % mark)
            else:
                env.log("[tensorfold] roce: all-gathers of up to 256 KiB a rank over RoCE on %s (simulated: the "
                        "rank link carries them)" % (hcas or "the CX7 link"))
        kv = self.kv_bytes()
        if kv < 400000:
            env.log("[tensorfold] latent KV cache (%s rows): %.1f KB a token a rank"
                    % (env.text("GLM53_TF_KV_DTYPE", "bf16"), kv / 1024.0))
        if self.requested > 1:
            env.log("[tensorfold] batching %d requests: %d extra sequence(s), prefill pieces of %d beside "
                    "decoders, admission at GLM53_TF_BATCH_ADMIT_GB=%s free"
                    % (self.slots, self.slots - 1, env.number("GLM53_TF_BATCH_PIECE", 2048, int),
                       _fmt(self.admit_gb)))
        pool = "off (a cache per slot)"
        if self.pool_tokens:
            pages = self.pool_tokens // 256
            env.log("[tensorfold] KV pool (patches/0290): %d tokens in %d pages of 256, %.2f GiB on this rank, "
                    "shared by the %d slots (a request reserves prompt + max_tokens + 64)"
                    % (self.pool_tokens, pages, self.pool_tokens * kv / GIB, self.slots))
            pool = "%d tokens (%d pages)" % (self.pool_tokens, pages)
        if self.session_gib > 0:
            env.log("[tensorfold] session store: %.1f GiB in RAM a rank, set aside at load" % self.session_gib)
        kv_text = ("latent %s, %d B a token a rank" % (env.text("GLM53_TF_KV_DTYPE", "bf16"), kv)
                   if kv < 400000 else "per-head bf16, ~0.4 MB a token a rank")
        env.log("[tensorfold] context: %d tokens a request (max_model_len; prompt + max_tokens); KV cache: %s; "
                "%d request slot(s); KV pool: %s" % (self.context, kv_text, self.slots, pool))

    # -- rank 1 -----------------------------------------------------------------
    def follow(self):
        """Rank 1 after the start: answer rank 0's requests until the link ends."""
        from tensorfold.families.glm5_next.cuda import decode, knobs
        self.knobs_mod, self.decode_mod = knobs, decode

        def answer(message):
            try:
                fields = knobs.check_header(message.get("header") or [], 1)
            except RuntimeError as exc:
                env.log("[tensorfold] rank 1: %s" % exc)
                return {"ok": False, "error": str(exc)}
            top = fields.get("logprobs", -1)
            full = model.full_positions(fields["reasoning"], fields["answer"])
            rows = decode.half_rows(fields["key"], 1, fields["positions"], fields["temperature"],
                                    None if top < 0 else top, full)
            return {"ok": True, "rows": rows}

        self.link.on_request = answer
        self.link.start()
        env.log("[tensorfold] rank 1 of 2 ready: following rank 0 at %s:%d (%d request slot(s); loaded in %.1fs)"
                % (self.args.master, self.args.master_port, self.slots, self.loaded_in))
        while True:
            time.sleep(3600)

    # -- rank 0 -----------------------------------------------------------------
    def lead(self, health):
        from tensorfold.families.glm5_next.cuda import batch, decode, knobs
        self.knobs_mod, self.decode_mod = knobs, decode
        self.health = health
        self.batcher = batch.Batcher(self.slots, pool_tokens=self.pool_tokens, admit_gb=self.admit_gb)
        self.link.start()

    def stop_ids(self):
        """Token ids that end a reply (the kit: the model's EOS only)."""
        return set([model.token_id(model.EOS)])

    def tokens_per_round(self, key, index):
        if self.drafts in ("off", "missing"):
            return 1
        if self.drafts == "dflash":
            return 1 + (key >> (index % 40)) % 7
        depth = self.args.mtp_drafts if self.args.mtp_drafts is not None else 3
        return 1 + (key >> (index % 40)) % (depth + 1)

    def generate(self, job, emit, gone):
        """Run ``job``; ``emit(events)`` gets each round's [(kind, text, logprob entry)]."""
        self.health.check_switch()
        if self.health.fatal is not None:
            raise EngineFatal("the engine failed earlier and needs a restart: %s" % self.health.fatal)
        job.slot, job.queue_s = self.batcher.acquire(job, gone)
        self.health.admit(job)
        try:
            self._generate(job, emit, gone)
        finally:
            job.kv_free = self.batcher.kv_free()
            self.batcher.release(job.slot)

    def _generate(self, job, emit, gone):
        from tensorfold.sim.batchcore import Cancelled
        # The silent tensor-parallel hang: the collective never returns, no token ever comes.
        while env.hung():
            if gone():
                raise Cancelled()
            time.sleep(0.2)
        began = time.monotonic()
        job.cached = self.prefix.lookup(job.prompt_ids)
        time.sleep((job.prompt - job.cached) / max(env.prefill_tps(), 1.0))
        self.prefix.add(job.prompt_ids)
        key = model.request_key(job.prompt_ids, -1 if job.seed is None else job.seed, job.temperature)
        reasoning, answer = model.plan(key, job.thinking, job.effort)
        # What the model writes: sampled tokens (None) and forced ones (their text).
        script, finish = decoding.script(key, job, self.stop)
        positions = decoding.sampled(script)
        full = model.full_positions(reasoning, answer)
        values = {"key": key, "prompt": job.prompt, "cached": job.cached, "positions": positions,
                  "temperature": job.temperature, "reasoning": reasoning, "answer": answer, "slot": job.slot,
                  "max_tokens": job.max_tokens, "logprobs": -1 if job.logprobs is None else job.logprobs}
        reply = self.link.call({"t": "req", "header": self.knobs_mod.header(values)})
        if not reply.get("ok"):
            raise RuntimeError(reply.get("error") or "rank 1 failed the request")
        rows0 = self.decode_mod.half_rows(key, 0, positions, job.temperature, job.logprobs, full)
        rows1 = reply["rows"]
        ids = self.decode_mod.decode_rows(rows0, rows1)
        entries = [None] * positions
        if job.logprobs is not None:
            sink = getattr(self.batcher, "lp_sink", None)
            if sink is None:
                raise RuntimeError("logprobs asked but this build's batcher has no lp_sink (patches/9001 "
                                   "installed only in part)")
            entries = sink(job, self.decode_mod.logprob_rows(rows0, rows1, job.logprobs))
        job.prefill_s = time.monotonic() - began
        tokens = []
        sampled = iter(range(positions))
        for kind, text in script:
            if text is None:
                index = next(sampled)
                tokens.append((kind, model.token_str(ids[index]), entries[index] if kind == "content" else None))
            else:
                tokens.append((kind, text, None))
        self._decode(job, key, tokens, emit)
        if job.finish is None:
            job.finish = finish

    def _decode(self, job, key, tokens, emit):
        decode_start = time.monotonic()
        stops = decoding.StopStrings(job.stop, job.min_tokens)
        index, due = 0, decode_start
        while index < len(tokens):
            take = self.tokens_per_round(key, job.rounds)
            due += env.round_seconds()  # paced by the clock: a late wake-up does not add up over rounds
            time.sleep(max(due - time.monotonic(), 0.0))
            events = []
            for kind, text, entry in tokens[index:index + take]:
                job.completion += 1
                cut = stops.feed(job.completion, text) if kind == "content" else None
                if cut is not None:
                    events += [(kind, cut, None)] if cut else []
                    job.finish = "stop"
                    break
                events.append((kind, text, entry))
            job.series["keeps"].append(take)
            job.series["depths"].append(max(take - 1, 0))
            job.series["drafters"].append(self.drafts)
            job.series["arms"].append(job.rounds % 3)
            job.series["stats"].append([take, round(env.round_seconds() * 1000, 2)])
            job.drafted += max(self.tokens_per_round(key, job.rounds + 1) - 1, 0)
            job.rounds += 1
            index += take
            if job.first is None:
                job.first = time.monotonic()
                job.first_s = job.first - job.t_start
                self.health.first_token(job)
            self.health.tokens(job, len(events))
            if events:
                emit(events)
            if job.finish is not None:
                break
        job.decode_s = time.monotonic() - decode_start

    def stats(self, job):
        """The full ``tensorfold`` object of a response (patch 9004 trims it)."""
        accepted = max(job.completion - job.rounds, 0)
        decode_tps = job.completion / job.decode_s if job.decode_s > 0 else 0.0
        return {
            "decode_tps": round(decode_tps, 1),
            "ttft_s": round(job.first_s or 0.0, 4),
            "queue_s": round(job.queue_s, 4),
            "prefill_s": round(job.prefill_s, 4),
            "decode_s": round(job.decode_s, 4),
            "rounds": job.rounds,
            "tokens_per_round": round(job.completion / job.rounds, 3) if job.rounds else 0.0,
            "cached": job.cached,
            "drafted": job.drafted,
            "accepted": accepted,
            "slot": job.slot,
            "tf_knobs": dict(job.knobs),
            "round_kinds": {"prefill": 1, "decode": job.rounds},
            "restored": 0,
            "sessions": {"ram": 0, "disk": 0},
            "mem_waits": 0,
            "solo_pieces": 0,
            "multi": 0,
            "disk": 0,
            "keeps": list(job.series["keeps"]),
            "depths": list(job.series["depths"]),
            "drafters": list(job.series["drafters"]),
            "arms": list(job.series["arms"]),
            "stats": [list(item) for item in job.series["stats"]],
            "speculative": {"rounds": job.rounds, "drafted": job.drafted, "accepted": accepted},
            "simulated": True,
        }

    def log_request(self, job, error=None):
        """One JSON line a finished request in GLM53_TF_REQUEST_LOG (no text)."""
        if not self.request_log:
            return
        record = {
            "ts": round(time.time(), 3),
            "start": round(job.started_wall, 3),
            "finish": job.finish or ("error" if error else "cancelled"),
            "prompt": job.prompt,
            "cached": job.cached,
            "source": "slot" if job.cached else "none",
            "decode_tokens": job.completion,
            "decode_s": round(job.decode_s, 4),
            "prefill_s": round(job.prefill_s, 4),
            "queue_s": round(job.queue_s, 4),
            "first_s": None if job.first_s is None else round(job.first_s, 4),
            "tokens_per_round": round(job.completion / job.rounds, 3) if job.rounds else None,
            "kv_free": job.kv_free,
            "kv_pages": job.pages,
            "max_tokens": job.max_tokens,
            "thinking": job.thinking,
            "effort": job.effort,
            "slot": job.slot,
            "prompt_hash": "%016x" % model.request_key(job.prompt_ids, 0, 0),
        }
        if error:
            record["error"] = str(error)[:200]
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._log_lock:
            try:
                os.makedirs(os.path.dirname(self.request_log) or ".", exist_ok=True)
                with open(self.request_log, "a") as handle:
                    handle.write(line)
            except OSError as exc:
                env.log("[tensorfold] request log %s: %s" % (self.request_log, exc))


def _fmt(value):
    return "%g" % value


def _gb(size):
    return ("%.1f" if size >= GB else "%.2f") % (size / GB)
