"""allocsim.trace: PyTorch programs traced on the CPU (PyTorch's CPU build, no GPU) as if on a
GPU. Checked against a GPU recording of the same job (workloads/diff_pairs/base_b8, an H100,
PyTorch 2.11): every request, in order, and the replay's peaks; and rule by rule against what
CUDA's kernels allocate (sizes from recordings on H100 and H200), so that a rule dropped or
changed fails here.

usage: trace_test.py STAGED_PACKAGE_DIR WORKLOADS_DIR   (exit 77: no torch or pytest here)
"""
import gzip
import os
import pickle
import subprocess
import sys

if __name__ == "__main__":
    try:
        import pytest
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (python/requirements-test.txt has both)")
        sys.exit(77)
    os.environ["ALLOCSIM_TEST_STAGED"] = os.path.abspath(sys.argv[1])
    os.environ["ALLOCSIM_TEST_WORKLOADS"] = os.path.abspath(sys.argv[2])
    sys.exit(pytest.main([__file__, "-q", "-rs", "-p", "no:cacheprovider"]))

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

STAGED = os.environ["ALLOCSIM_TEST_STAGED"]
WORKLOADS = os.environ["ALLOCSIM_TEST_WORKLOADS"]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, STAGED)
os.environ.pop("ALLOCSIM_BINARY", None)
import allocsim  # noqa: E402
from allocsim.tracer import Tracer, TraceError  # noqa: E402

MiB = 2**20


class _SnapshotUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a snapshot names no class ({module}.{name})")


def recorded_allocs(path):
    with gzip.open(path) as f:
        snapshot = _SnapshotUnpickler(f).load()
    return [(e["size"], e["stream"]) for e in snapshot["device_traces"][0]
            if e["action"] == "alloc"]


def allocs(tracer):
    return [(r.size, r.what) for r in tracer.requests() if r.action == "alloc"]


def test_a_script_traced_on_the_cpu_makes_its_gpu_runs_requests(tmp_path):
    out = str(tmp_path / "mlp.pickle.gz")
    p = subprocess.run([sys.executable, "-m", "allocsim.trace", "-o", out, "--card", "h100",
                        os.path.join(HERE, "trace_programs", "mlp_job.py"), "8", "3"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=STAGED))
    assert p.returncode == 0, p.stderr
    assert "values read from tensors" in p.stderr  # the script's loss.item()
    real = recorded_allocs(os.path.join(WORKLOADS, "diff_pairs", "base_b8.pickle.gz"))
    traced = recorded_allocs(out)
    assert len(traced) == len(real) == 822
    assert traced == real  # every allocation, in order, its size and stream
    ours = allocsim.replay(out)
    theirs = allocsim.replay(os.path.join(WORKLOADS, "diff_pairs", "base_b8.pickle.gz"))
    for key in ("allocated_bytes.all.peak", "reserved_bytes.all.peak"):
        assert ours["memory_stats"][key] == theirs["memory_stats"][key]


def test_cublas_workspace_config_sets_the_workspace(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    with Tracer(card="h100") as t:
        nn.Linear(8, 8).cuda()(torch.randn(2, 8, device="cuda"))
    assert [s for s, w in allocs(t) if w == "cuBLAS workspace"] == [16 * 1024 * 8]


def test_cublas_workspaces_one_per_thread_and_stream_sized_by_card():
    for card, workspace in (("h100", 32 * MiB), ("a100", 4096 * 1024 * 2 + 16 * 1024 * 8)):
        with Tracer(card=card) as t:
            layer = nn.Linear(64, 32).cuda()
            x = torch.randn(16, 64, device="cuda", requires_grad=True)
            layer(x).sum().backward()
            layer(x).sum().backward()
        a = allocs(t)
        assert [s for s, w in a if w == "cuBLAS workspace"] == [workspace, workspace]
        assert [s for s, w in a if w == "cuBLASLt workspace"] == [MiB]
        first = [w for _, w in a].index("cuBLAS workspace")
        assert a[first - 1] == (16 * 32 * 4, "aten.addmm.default")  # after the product's output
        assert a[first + 1][1] == "cuBLASLt workspace"


def test_dropout_takes_cudas_fused_kernel_mask_first():
    with Tracer() as t:
        x = torch.randn(4, 256, device="cuda")
        nn.functional.dropout(x, 0.1, training=True)
        nn.functional.dropout(x, 0.1, training=False)
    assert allocs(t)[1:] == [(1024, "aten.native_dropout.default"),
                             (4096, "aten.native_dropout.default")]


def test_autocast_follows_cudas_lists_and_caches_weight_casts():
    with Tracer() as t:
        layer = nn.Linear(64, 64).cuda()
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = layer(layer(x))
            n = nn.functional.layer_norm(h, (64,))
            s = torch.softmax(h, -1)
    assert n.dtype == torch.float32 and s.dtype == torch.float32 and h.dtype == torch.bfloat16
    a = allocs(t)
    casts = [s for s, w in a[a.index((8 * 64 * 4, "aten.randn.default")):]
             if w == "aten._to_copy.default"]
    # linear's bias, weight and input (the last argument first, as GCC evaluates the casts of a
    # pack expansion), the weight and bias once for both calls (the hidden is bf16 already);
    # layer_norm's and softmax's bfloat16 input to float32
    assert casts == [64 * 2, 64 * 64 * 2, 8 * 64 * 2, 8 * 64 * 4, 8 * 64 * 4]
    with Tracer() as t:
        h = torch.randn(8, 64, device="cuda", dtype=torch.float16)
        with torch.autocast("cuda"):  # float16 by default, as on CUDA
            s = torch.softmax(h, -1)
    # half to float in the kernel: the output only
    assert s.dtype == torch.float32 and allocs(t)[1:] == [(8 * 64 * 4, "aten._softmax.default")]


@pytest.mark.parametrize("width,buffer,semaphores", [(768, 50331648, 24),
                                                     (3072, 138412032, 96),
                                                     (2304, 139198464, 72)])
def test_a_bias_gradients_sum_stages_its_partial_sums(width, buffer, semaphores):
    # the sizes GPT-2's bias gradients (8192 rows) allocate on an H200 (132 SMs)
    with Tracer(card="h200") as t:
        g = torch.empty(8, 1024, width, device="cuda")
        kept = g.sum(dim=(0, 1))  # noqa: F841
    assert allocs(t)[1:] == [(width * 4, "aten.sum.dim_IntList"),
                             (buffer, "reduction staging"), (semaphores, "reduction staging")]
    frees = [r for r in t.requests() if r.action == "free"]
    assert [r.size for r in frees] == [semaphores, buffer]


def test_a_channels_last_gradients_sum_over_batch_and_space_stages_too():
    # ConvNeXt's layer-scale gradient on an H200: (32, 384, 14, 14) in channels-last memory
    # summed over all but the channels
    with Tracer(card="h200") as t:
        g = torch.empty(32, 14, 14, 384, device="cuda").permute(0, 3, 1, 2)
        kept = g.sum(dim=(0, 2, 3))  # noqa: F841
    assert [s for s, w in allocs(t)[1:]] == [384 * 4, 19267584, 12]


def test_attention_runs_cudas_kernels():
    with Tracer() as t:
        q = torch.randn(2, 4, 100, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        f = torch.randn(2, 4, 100, 64, device="cuda", requires_grad=True)
        nn.functional.scaled_dot_product_attention(f, f, f)
    # On sm90 PyTorch 2.11 tries cuDNN's attention first (workloads/kernels/ops_h100.json.gz):
    # its random-number seed and offset on the device, the output, the logsumexp, and a 256-byte
    # scratch, as flash's (an H200 recording of Llama and ViT shows them)
    flash = "aten._scaled_dot_product_cudnn_attention.default"
    efficient = "aten._scaled_dot_product_efficient_attention.default"
    a = allocs(t)
    assert a[1:6] == [(8, flash), (8, flash), (2 * 4 * 100 * 64 * 2, flash),
                      (2 * 4 * 100 * 4, flash), (256, flash)]
    # memory-efficient attention: its logsumexp has its rows padded to 32
    assert a[7:9] == [(2 * 4 * 100 * 64 * 4, efficient), (2 * 4 * 128 * 4, efficient)]


def test_attention_with_a_learned_bias_takes_the_math_path():
    with Tracer() as t:
        q = torch.randn(2, 4, 64, 32, device="cuda", requires_grad=True)
        bias = torch.zeros(1, 4, 64, 64, device="cuda", requires_grad=True)  # T5's position bias
        nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias)
        fixed = torch.zeros(1, 4, 64, 64, device="cuda")
        nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=fixed)
    whats = [w for _, w in allocs(t)]
    # the first call computes the scores (2, 4, 64, 64) itself; the second goes to the
    # memory-efficient kernel
    assert "aten.bmm.default" in whats[:whats.index(
        "aten._scaled_dot_product_efficient_attention.default")]
    # as on CUDA (T5 on an H200): the bias added to the scores in place, then the safe
    # softmax's output, -inf mask, fully masked rows and zero
    scores = 2 * 4 * 64 * 64
    math = [(s, w) for s, w in allocs(t)][:whats.index(
        "aten._scaled_dot_product_efficient_attention.default")]
    assert "aten.add.Tensor" not in [w for _, w in math]
    softmax = [s for s, w in math if w == "aten._safe_softmax.default"]
    assert softmax == [scores * 4, scores, 2 * 4 * 64, 4]
    # its backward: the gradient, then the gradient times the output, a temporary
    with Tracer() as t:
        scores_in = torch.randn(2, 4, 64, 64, device="cuda", requires_grad=True)
        torch.softmax(scores_in, -1).sum().backward()
    backward = [(r.action, r.size) for r in t.requests()
                if r.what == "aten._softmax_backward_data.default"]
    assert backward[:3] == [("alloc", scores * 4), ("alloc", scores * 4), ("free", scores * 4)]


def test_attention_backward_workspaces():
    with Tracer() as t:
        q = torch.randn(4, 16, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    # Llama at batch 4 (16 heads, 512 tokens, head size 64) on an H200: one workspace after the
    # three gradients, freed within the op
    work = [s for s, w in allocs(t)
            if w == "aten._scaled_dot_product_cudnn_attention_backward.default"]
    assert work == [4 * 16 * 512 * 64 * 2] * 3 + [8519936]
    # Where flash comes first (sm80), its backward's workspace is the same size.
    with Tracer(card="a100") as t:
        q = torch.randn(4, 16, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    work = [s for s, w in allocs(t)
            if w == "aten._scaled_dot_product_flash_attention_backward.default"]
    assert work == [4 * 16 * 512 * 64 * 2] * 3 + [8519936]


def test_cards_of_other_architectures_take_their_own_kernels_limits():
    # Reduction staging: as many blocks per multiprocessor as its threads allow (1,536 on sm89).
    def staging(card):
        with Tracer(card=card) as t:
            torch.randn(1 << 24, device="cuda").sum()
        return [s for s, w in allocs(t) if w == "reduction staging"]
    assert staging("h100") == [4 * 132 * (2048 // 512), 4]
    assert staging("l4") == [4 * 58 * (1536 // 512), 4]
    # Flash attention trains with head sizes of 193 to 224 nowhere on sm86 to sm89: the
    # memory-efficient kernel instead; without gradients, or on sm80, flash.
    def backend(card, grad, head=200):
        with Tracer(card=card) as t:
            q = torch.randn(2, 4, 128, head, device="cuda", dtype=torch.float16,
                            requires_grad=grad)
            nn.functional.scaled_dot_product_attention(q, q, q)
        names = {w for _, w in allocs(t)}
        return ("flash" if any("flash" in n for n in names) else
                "efficient" if any("efficient" in n for n in names) else "other")
    assert backend("rtx4090", True) == "efficient"
    assert backend("rtx4090", False) == "flash"
    assert backend("a100", True) == "flash"


def test_cublaslt_workspace_size_is_read(monkeypatch):
    def workspace():
        with Tracer(card="h100") as t:
            nn.Linear(8, 8).cuda()(torch.randn(2, 8, device="cuda"))
        return [s for s, w in allocs(t) if w == "cuBLASLt workspace"]
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "2048")  # KiB
    assert workspace() == [2 * MiB]
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "lots")  # PyTorch warns, keeps its default
    assert workspace() == [MiB]
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2:16:8")
    with Tracer(card="a100") as t:
        nn.Linear(8, 8).cuda()(torch.randn(2, 8, device="cuda"))
    assert [s for s, w in allocs(t) if w == "cuBLAS workspace"] == [4096 * 1024 * 2 + 16 * 1024 * 8]


def test_layer_norm_copies_a_non_contiguous_input():
    with Tracer() as t:
        x = torch.randn(64, 8, 32, device="cuda").transpose(0, 1)
        nn.functional.layer_norm(x, (32,))
    assert [s for s, w in allocs(t)[1:]] == [64 * 8 * 32 * 4, 64 * 8 * 32 * 4, 8 * 64 * 4,
                                            8 * 64 * 4]
    assert [r.size for r in t.requests() if r.action == "free"][0] == 64 * 8 * 32 * 4


def test_layer_norm_over_many_rows_sums_gamma_and_beta_in_two_stages():
    # ConvNeXt's first stage at batch 32 on an H200: 100,352 rows of 96 features
    with Tracer(card="h200") as t:
        norm = nn.LayerNorm(96).cuda()
        x = torch.randn(32, 56, 56, 96, device="cuda", requires_grad=True)
        norm(x).pow(2).sum().backward()  # a contiguous gradient, as the network's
    backward = [s for s, w in allocs(t) if w == "aten.native_layer_norm_backward.default"]
    assert backward == [32 * 56 * 56 * 96 * 4, 384, 384, 1204224, 1204224,
                        384, 614400, 8, 384, 614400, 8]


def test_group_norm_keeps_its_per_channel_buffers_for_the_kernel():
    # the UNet's GroupNorm(32, 128) at batch 16 on an H200: (16, 128) float32 twice after the
    # forward's outputs; the backward's per-channel sums, per-group coefficients and a broadcast
    with Tracer() as t:
        norm = nn.GroupNorm(32, 128).cuda()
        x = torch.randn(16, 128, 8, 8, device="cuda", requires_grad=True)
        norm(x).sum().backward()
    forward = [s for s, w in allocs(t) if w == "aten.native_group_norm.default"]
    assert forward == [16 * 128 * 64 * 4, 16 * 32 * 4, 16 * 32 * 4, 8192, 8192]
    backward = [s for s, w in allocs(t) if w == "aten.native_group_norm_backward.default"]
    assert backward == [16 * 128 * 64 * 4, 512, 512, 8192, 8192, 2048, 2048, 8192]


def test_linear_adds_its_bias_in_place_on_a_non_contiguous_input():
    with Tracer() as t:
        layer = nn.Linear(32, 48).cuda()
        x = torch.randn(16, 8, 32, device="cuda").transpose(0, 1)
        layer(x)
    after = allocs(t)[allocs(t).index((16 * 8 * 32 * 4, "aten.randn.default")) + 1:]
    # matmul's contiguous copy of the input and its product; the bias goes into the product
    assert [w for _, w in after if not w.startswith("cuBLAS")] == ["aten.clone.default",
                                                                 "aten.mm.default"]


def test_embedding_backward_sorts_many_indices_not_few():
    def backward_allocs(rows, tokens):
        with Tracer(card="h200") as t:
            emb = nn.Embedding(rows, 64).cuda()
            ids = torch.randint(0, rows, (tokens,), device="cuda")
            emb(ids).sum().backward()
        return [s for s, w in allocs(t) if w == "aten.embedding_dense_backward.default"]
    # BERT's and GPT-2's word embeddings on an H200 (4,096 tokens, more rows): sorted and
    # original positions, a range, cub's radix sort storage; the gradient; segment offsets, their
    # count, ends, a scan's storage; per segment (4,096 at most) partial segments and offsets,
    # a scan, the partial count, per partial segment (4,096 / 10 + 4,096) an offset and a row
    n = 4096
    partials = n // 10 + n
    assert backward_allocs(50257, n) == [
        n * 8, n * 8, n * 8, 83455, 50257 * 64 * 4, n * 8, 8, n * 8, 1279,
        n * 8, n * 8, 1279, 8, partials * 8, partials * 64 * 4]
    # fewer rows than tokens (BERT's token types): min(rows, tokens) segments, no partial rows
    assert backward_allocs(1000, 8192)[-5:] == [1000 * 8, 1000 * 8, 1279, 8,
                                                (8192 // 10 + 1000) * 8]
    assert backward_allocs(1000, 1024) == [1000 * 64 * 4]  # up to 3,072: no sort


def test_backward_hooks_make_device_tensors_too():
    # The autograd engine runs hooks (FSDP's, DDP's) without torch-function modes: a device
    # named there is still the pretend GPU's
    with Tracer() as t:
        x = torch.randn(16, device="cuda", requires_grad=True)
        made = []
        y = x * 2
        y.register_hook(lambda g: made.append(torch.empty(1000, device="cuda")))
        y.sum().backward()
        assert made[0].device.type == "cuda"
    assert (4000, "aten.empty.memory_format") in allocs(t)


def test_a_storage_resized_in_place_is_freed_and_allocated_again():
    # FSDP frees an unsharded parameter by resizing its storage to 0 and brings it back so
    with Tracer() as t:
        p = torch.empty(256, device="cuda")
        p.untyped_storage().resize_(0)
        p.untyped_storage().resize_(1024)
    assert [(r.action, r.size) for r in t.requests()] == [("alloc", 1024), ("free", 1024),
                                                         ("alloc", 1024)]


def test_fsdp2_rank_zero_of_two_on_one_cpu():
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("this PyTorch has no torch.distributed")
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    with Tracer() as t:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        try:
            model = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 256)).cuda()
            fully_shard(model[0])
            fully_shard(model)
            opt = torch.optim.AdamW(model.parameters())
            model(torch.randn(8, 256, device="cuda")).sum().backward()
            opt.step()
        finally:
            dist.destroy_process_group()
    sizes = [s for s, _ in allocs(t)]
    half = 256 * 256 * 4 // 2
    # the sharded weights (half each), their all-gathered whole again (storage resized back),
    # and AdamW's state for the shards
    assert sizes.count(half) >= 2 + 2 * 2
    assert any(w == "UntypedStorage.resize_" for _, w in allocs(t))


def test_ddp_rank_zero_of_two_on_one_cpu():
    # DDP's reducer makes its gradient bucket in C++ from its parameters' options: on the device,
    # one bucket of every gradient, filled in the backward and averaged in place
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        with Tracer() as t:
            model = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 256)).cuda()
            ddp = nn.parallel.DistributedDataParallel(model)
            for _ in range(2):
                ddp(torch.randn(8, 256, device="cuda")).sum().backward()
            assert model[0].weight.grad is not None
    finally:
        dist.destroy_process_group()
    bucket = 2 * (256 * 256 + 256) * 4
    made = [w for s, w in allocs(t) if s == bucket]
    assert made and all(w.startswith("aten.") for w in made)


def test_fsdp2_copy_kernels_pack_their_metadata_on_the_device():
    # a Llama layer's (hidden 1024, MLP 2816) all-gather copy-out and reduce-scatter copy-in at
    # two ranks on an H200: 25,400 and 100,816 bytes of int64 metadata, made and freed
    shards = [524288] * 4 + [1441792] * 3 + [512] * 2
    grads = [(1024, 1024)] * 4 + [(2816, 1024), (2816, 1024), (1024, 2816), (1024,), (1024,)]
    with Tracer(card="h200") as t:
        gathered = torch.empty(2, sum(shards), dtype=torch.bfloat16, device="cuda")
        outs = [torch.empty(2, n, dtype=torch.bfloat16, device="cuda") for n in shards]
        torch.split_with_sizes_copy(gathered, shards, dim=1, out=outs)
        tensors = [torch.empty(shape, dtype=torch.bfloat16, device="cuda") for shape in grads]
        total = sum(torch.Size(shape).numel() for shape in grads)
        out = torch.empty(2, total // 2, dtype=torch.float32, device="cuda")
        torch._chunk_cat(tensors, 0, 2, out=out)
    requests = [(r.action, r.size) for r in t.requests()]
    for meta in (25400, 100816):
        made = requests.index(("alloc", meta))
        assert requests[made + 1] == ("free", meta)


def test_host_tensors_are_real_and_untraced():
    with Tracer() as t:
        x = torch.arange(10.0)
        assert x.sum().item() == 45.0  # the host's values are there to read
        y = x.cuda()
        assert y.device.type == "cuda" and y.is_cuda and x.device.type == "cpu"
        z = y.cpu()
        assert z.device.type == "cpu"
        y.cuda()  # already there: no copy
    assert allocs(t) == [(40, "aten._to_copy.default")]


def test_values_the_program_filled_are_read_back():
    with Tracer() as t:
        mask = torch.ones(4, 8, dtype=torch.long, device="cuda")
        assert mask.sum().item() == 32  # filled by the program: known
        assert bool((mask == 1).all())
        positions = torch.arange(8, device="cuda") + 3
        assert positions.cpu().tolist() == list(range(3, 11))  # the host copy is real
        assert torch.tensor([5, 7], device="cuda").max().item() == 7
        data = torch.randn(4, device="cuda")
        assert data.sum().item() == 0.0  # from data: not known, read as 0 and warned
    assert any("values read from tensors" in w for w in t.warnings)


def test_a_loop_that_stops_on_a_device_value_stops_where_the_gpu_would():
    # A generation loop's stopping test: sequences end at a length, or at a token (data).
    with Tracer():
        unfinished = torch.ones(4, dtype=torch.long, device="cuda")
        steps = 0
        while True:
            steps += 1
            at_length = torch.full((4,), steps >= 6, dtype=torch.bool, device="cuda")
            at_token = torch.randn(4, device="cuda") > 2.0  # data: unknown
            unfinished = unfinished & ~(at_length | at_token)
            if bool(unfinished.max() == 0):
                break
            assert steps < 100
    assert steps == 6
    with Tracer():
        x = torch.randn(4, device="cuda") > 0
        y = torch.zeros(4, dtype=torch.bool, device="cuda")
        assert not bool((x & ~y).any())  # unknown either way: read as False
        assert bool((x | ~y).all())  # True whatever x holds


def test_library_fake_tensor_tests_answer_as_on_a_gpu(monkeypatch):
    # transformers builds explicit attention masks where it sees a fake tensor (graph capture)
    import types
    module = types.ModuleType("transformers.utils.import_utils")
    module.is_fake_tensor = lambda x: True
    monkeypatch.setitem(sys.modules, "transformers.utils.import_utils", module)
    with Tracer():
        x = torch.ones(2, device="cuda")
        assert module.is_fake_tensor(x) is False
    assert module.is_fake_tensor(x) is True


def test_where_with_a_number_puts_the_number_on_the_device():
    # GPT-2's generation on an H200: torch.where(mask, -inf, scores) allocates 4 bytes first
    with Tracer() as t:
        scores = torch.randn(4, 1000, device="cuda")
        mask = scores > 0
        torch.where(mask, float("-inf"), scores)
        torch.where(mask, scores, 0.0)
    sizes = [s for s, w in allocs(t)][2:]
    assert sizes == [4, 16000, 4, 16000]


def test_isin_against_few_values_and_a_converted_sum():
    # GPT-2's generation on an H200: isin over a 50,257-token vocabulary against one token
    # makes the output and two temporaries of its size; a bool mask's sum, an int64 copy
    with Tracer() as t:
        vocab = torch.arange(50257, device="cuda")
        torch.isin(vocab, torch.tensor([50256], device="cuda"))
        mask = torch.ones(32, 128, dtype=torch.bool, device="cuda")
        mask.sum()
    sizes = [s for s, w in allocs(t)]
    assert sizes == [402056, 8, 50257, 50257, 50257, 4096, 8, 32768]
    requests = [(r.action, r.size) for r in t.requests()]
    isin = requests.index(("alloc", 50257))
    assert requests[isin + 1:isin + 5] == [("alloc", 50257), ("alloc", 50257),
                                           ("free", 50257), ("free", 50257)]
    converted = requests.index(("alloc", 32768))
    assert requests[converted + 1] == ("free", 32768)


def test_convolutions_allocate_cudnns_workspaces_from_the_cards_table():
    # ResNet-50's stem at batch 2 on an H200: the output, then a 7,664,400-byte workspace
    with Tracer(card="h200") as t:
        stem = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False).cuda()
        x = torch.randn(2, 3, 224, 224, device="cuda")
        stem(x)
    requests = [(r.action, r.size) for r in t.requests()]
    out = requests.index(("alloc", 2 * 64 * 112 * 112 * 4))
    assert requests[out + 1:out + 3] == [("alloc", 7664400), ("free", 7664400)]
    assert not any("cuDNN" in w for w in t.warnings)
    with Tracer(card="h200") as t:
        odd = nn.Conv2d(3, 5, 3).cuda()
        odd(torch.randn(1, 3, 9, 9, device="cuda"))
    assert [s for s, w in allocs(t)][-1] == 5 * 7 * 7 * 4  # the output alone
    assert any("1 convolution call(s) of 1 shape(s) are not in the table recorded on an "
               "NVIDIA H200" in w for w in t.warnings)


def test_the_engine_sums_gradients_in_place():
    with Tracer() as t:
        layer = nn.Linear(64, 64).cuda()
        norm = nn.LayerNorm(64).cuda()
        x = torch.randn(32, 64, device="cuda", requires_grad=True)
        (x + layer(norm(x))).float().pow(2).mean().backward()
    adds = [w for _, w in allocs(t) if w == "aten.add.Tensor"]
    assert len(adds) == 1  # the forward's residual; the backward's sum of x's two gradients
    # goes into the first, as CUDA's autograd does with a gradient it holds the only reference to


def test_the_foreach_optimizer_path_as_on_cuda():
    with Tracer() as t:
        layer = nn.Linear(64, 64).cuda()
        opt = torch.optim.AdamW(layer.parameters())
        layer(torch.randn(8, 64, device="cuda")).sum().backward()
        opt.step()
    assert any(w.startswith("aten._foreach_") for _, w in allocs(t))


def test_trace_api_and_formats(tmp_path):
    def setup():
        return nn.Linear(32, 32).cuda()

    def step(layer):
        layer(torch.randn(4, 32, device="cuda")).sum().backward()
    for name in ("t.atrace", "t.pickle"):
        tracer = allocsim.trace(step, steps=2, setup=setup, out=str(tmp_path / name))
        report = allocsim.replay(str(tmp_path / name))
        assert report["memory_stats"]["allocation.all.allocated"] == len(allocs(tracer))


def _trace_cli(*args):
    return subprocess.run([sys.executable, "-m", "allocsim.trace", *args], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=STAGED))


def test_the_script_at_several_values_and_the_largest_that_fits(tmp_path):
    script = os.path.join(HERE, "trace_programs", "mlp_job.py")
    out = str(tmp_path / "b{value}.pickle.gz")
    p = _trace_cli(script, "-o", out, "--values", "8,12", "--", "{value}", "1")
    assert p.returncode == 0, p.stderr
    small, large = (allocsim.replay(out.format(value=v)) for v in (8, 12))
    assert (small["memory_stats"]["allocated_bytes.all.peak"] <
            large["memory_stats"]["allocated_bytes.all.peak"])
    limit = 2_000_000_000
    p = _trace_cli(script, "-o", out, "--values", "4:64", "--fit-limit", str(limit), "--",
                   "{value}", "1")
    assert p.returncode == 0, p.stderr
    best = int(p.stdout.strip().splitlines()[-1].rsplit(" ", 1)[1])
    assert 4 < best < 64
    # the answer is the boundary: its trace fits under the cap, the next one's does not
    assert allocsim.replay(out.format(value=best), memory_limit=limit)["ooms"] == 0
    _trace_cli(script, "-o", out, "--values", str(best + 1), "--", "{value}", "1")
    assert allocsim.replay(out.format(value=best + 1), memory_limit=limit)["ooms"] > 0
    bad = _trace_cli(script, "-o", out, "--values", "4:x", "--fit-limit", "1GiB")
    assert bad.returncode == 2 and "--values 4:x: expected LOW:HIGH" in bad.stderr
    unnamed = _trace_cli(script, "-o", str(tmp_path / "one.pickle"), "--values", "4,8")
    assert unnamed.returncode == 2 and "{value}" in unnamed.stderr


def test_a_program_that_needs_device_values_is_refused_in_one_line(tmp_path):
    with pytest.raises(TraceError, match=r"aten.nonzero.*needs the tensors' values.*trace_test"):
        with Tracer():
            x = torch.randn(10, device="cuda")
            x.nonzero()
    script = tmp_path / "bad.py"
    script.write_text("import torch\ntorch.randn(4, device='cuda').nonzero()\n")
    p = subprocess.run([sys.executable, "-m", "allocsim.trace", "-o", str(tmp_path / "b.atrace"),
                        str(script)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=STAGED))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("allocsim trace: error:")
    assert "bad.py:2" in p.stderr
    missing = subprocess.run([sys.executable, "-m", "allocsim.trace", "-o", "x.atrace",
                              str(tmp_path / "none.py")], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=STAGED))
    assert missing.returncode == 2 and "none.py: no such script" in missing.stderr
