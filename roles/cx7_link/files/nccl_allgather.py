# NCCL all-gather bandwidth over the CX7 link, run inside the engine image (torch +
# NCCL) on every Spark. Env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, BYTES, ITERS.
# Rank 0 prints one JSON line; bus bandwidth uses the nccl-tests convention for
# all-gather (algbw * (n-1)/n), so the number compares with all_gather_perf.
import json
import os
import time

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ.get("WORLD_SIZE", 2))
    dist.init_process_group(
        "nccl",
        init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]),
        rank=rank,
        world_size=world,
    )
    torch.cuda.set_device(0)
    total = int(os.environ.get("BYTES", 1 << 30))
    iters = int(os.environ.get("ITERS", 20))
    chunk = torch.ones(total // world // 2, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(chunk.numel() * world, dtype=chunk.dtype, device="cuda")
    for _warmup in range(5):
        dist.all_gather_into_tensor(out, chunk)
    torch.cuda.synchronize()
    start = time.time()
    for _step in range(iters):
        dist.all_gather_into_tensor(out, chunk)
    torch.cuda.synchronize()
    seconds = (time.time() - start) / iters
    size = out.numel() * out.element_size()
    algbw = size / seconds / 1e9
    if rank == 0:
        print(json.dumps({"bytes": size, "seconds": seconds, "algbw_gbs": algbw,
                          "busbw_gbs": algbw * (world - 1) / world}))
    dist.destroy_process_group()


main()
