"""Temporary: where a seed-size HBM step's time goes (host vs GPU), per op."""
import sys, time, os
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_tables as B
from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from torch.profiler import profile, ProfilerActivity
work = B.Workload(10, 1677721, 104857, 128, 1.05, 8, 2, 1.0, torch.device("cuda"))
batches = B.make_batches(work)
opts = [DynamicEmbTableOptions(dim=128, max_capacity=1677721, seed=t) for t in range(10)]
t = BatchedDynamicEmbeddingTables(opts, EmbOptimType.EXACT_SGD, PoolingMode.NONE, device="cuda", learning_rate=0.01)
grad = torch.ones(batches[0][0].numel(), 128, device="cuda")
def step(i):
    ids, off = batches[i % len(batches)]
    out = t(ids, off); out.backward(grad[: out.shape[0]])
for i in range(len(batches) * 2): step(i)
torch.cuda.synchronize()
t.reset_cache_stats()
for i in range(8): step(i)
print("stats over 8 steady steps:", t.cache_stats())
torch.cuda.synchronize()
for k in range(2):
    t0 = time.perf_counter(); e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True); e0.record()
    for i in range(8): step(i)
    h = time.perf_counter() - t0; e1.record(); torch.cuda.synchronize()
    print(f"host {h/8*1e3:.3f} ms/step enqueue, gpu {e0.elapsed_time(e1)/8:.3f} ms/step")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for i in range(4): step(i)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=22, max_name_column_width=50))
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=50))
