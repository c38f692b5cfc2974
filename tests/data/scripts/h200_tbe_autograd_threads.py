import sys, torch
sys.path.insert(0, "src")
from dynemb.ranges import emit_range, op_range
import fbgemm_gpu
from fbgemm_gpu.split_table_batched_embeddings_ops_training import SplitTableBatchedEmbeddingBagsCodegen, EmbeddingLocation, ComputeDevice
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_embedding_configs import EmbOptimType
print("torch", torch.__version__, "fbgemm", getattr(fbgemm_gpu, "__version__", "?"), torch.cuda.get_device_name())
tbe = SplitTableBatchedEmbeddingBagsCodegen([(1000, 16, EmbeddingLocation.DEVICE, ComputeDevice.CUDA)]*2,
      optimizer=EmbOptimType.EXACT_SGD, pooling_mode=PoolingMode.NONE, learning_rate=0.1).cuda()
idx = torch.randint(0, 1000, (64,), device="cuda"); off = torch.arange(0, 65, 2, device="cuda")
lin = torch.nn.Linear(16, 16).cuda()
for i in range(3):
    out = tbe(idx, off)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for i in range(2):
    with emit_range("T2_totalB32_D16_sgd_gpu_pool=none_cap=1000"), emit_range(f"nsys_iter_{i}"), emit_range("trc"):
        with emit_range("forward"):
            out = lin(tbe(idx, off))
        with emit_range("backward"):
            with torch.autograd.set_multithreading_enabled(False):
                out.sum().backward()
        with emit_range("backward_mt"):
            out = lin(tbe(idx, off)); out.sum().backward()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("ok")
