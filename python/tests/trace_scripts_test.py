"""allocsim.trace on scripts as users write them: torch.cuda's whole public API answered (each
entry checked, so that dropping one fails here), the choices a script makes of CUDA's kernels
followed (attention backends, cuDNN's switches, deterministic algorithms, parameters that keep
their identity through .cuda()), what the tracer does not model bounded and said (cub's ops,
RNNs, torch.compile, convolutions outside the table), the script's own allocator calls carried
into the replay (caps, empty_cache, pools), patches undone on any failure, and the user jobs of
tools/user_jobs/ traced without a crash on the PyTorch installed (the test environment's CPU
build; scripts/test.sh runs this file under 2.14.1's CUDA build too).

usage: trace_scripts_test.py STAGED_PACKAGE_DIR WORKLOADS_DIR   (exit 77: no torch or pytest)
"""
import contextlib
import gzip
import importlib.util
import inspect
import json
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
HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "user_jobs")
sys.path.insert(0, STAGED)
os.environ.pop("ALLOCSIM_BINARY", None)
import allocsim  # noqa: E402
from allocsim.tracer import Tracer, TraceError  # noqa: E402
from allocsim.tracer.cuda_standin import CudaStandin  # noqa: E402

MiB = 2**20


class _NoClasses(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a snapshot names no class ({module}.{name})")


def load(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return _NoClasses(f).load()


def allocs(tracer, bound="lower"):
    return [(r.size_in(bound), r.what) for r in tracer.requests(bound) if r.action == "alloc"]


def trace_cli(tmp_path, source, *args, name="job.py"):
    script = tmp_path / name
    script.write_text(source)
    return subprocess.run([sys.executable, "-m", "allocsim.trace", str(script), *args],
                          capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=STAGED))


# --- torch.cuda's API ---

def test_the_card_and_its_runtime_answer_as_the_pretend_card():
    with Tracer(card="l4") as t:
        assert torch.cuda.is_available() and torch.cuda.is_initialized()
        assert torch.cuda.device_count() == 1 and torch.cuda.current_device() == 0
        assert torch.cuda.get_device_name() == "NVIDIA L4"
        assert torch.cuda.get_device_capability(0) == (8, 9)
        props = torch.cuda.get_device_properties(0)
        assert props.total_memory == t.card.total_memory and props.multi_processor_count == 58
        assert props.max_threads_per_multi_processor == 1536
        assert torch.cuda.is_bf16_supported() and torch.cuda.get_arch_list() == ["sm_89"]
        torch.cuda.synchronize()
        torch.cuda.init()
        with torch.cuda.device(0):
            with torch.cuda.device_of(torch.zeros(1, device="cuda")):
                pass
        state = torch.cuda.get_rng_state()
        assert state.dtype == torch.uint8 and not t.on_device(state)
        torch.cuda.set_rng_state(state)
        assert len(torch.cuda.get_rng_state_all()) == 1
        torch.cuda.manual_seed_all(1)
        assert torch.cuda.initial_seed() == torch.initial_seed()
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.mark("here")
        torch.cuda.nvtx.range_pop()
        with torch.cuda.nvtx.range("forward"):
            pass
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) == 0.0 and end.query()
        assert not torch.cuda.is_current_stream_capturing()
    assert not t.warnings


def test_every_public_function_of_torch_cuda_is_answered_or_warned():
    import torch.cuda.graphs
    import torch.cuda.memory
    import torch.cuda.nvtx
    import torch.cuda.random
    modules = [torch.cuda, torch.cuda.memory, torch.cuda.random, torch.cuda.graphs,
               torch.cuda.nvtx]
    before = {(m.__name__, n): v for m in modules for n, v in vars(m).items()
              if not n.startswith("_") and inspect.isfunction(v) and
              (v.__module__ or "").startswith("torch.cuda")}
    pure = {"lru_cache", "classproperty", "cast", "signature", "overload", "contextmanager",
            "deprecated"}
    with Tracer():
        unchanged = [f"{m}.{n}" for (m, n), v in before.items()
                     if n not in pure and getattr(sys.modules[m], n) is v]
    assert unchanged == []
    assert all(getattr(sys.modules[m], n) is v for (m, n), v in before.items())  # put back


def test_every_answer_of_the_stand_in_is_installed():
    with Tracer() as t:
        answers = CudaStandin(t, t.card).answers()
        for name in answers:
            homes = [m for m in (torch.cuda, sys.modules.get("torch.cuda.memory"))
                     if m is not None and name in vars(m)]
            for module in homes:
                value = vars(module)[name]
                assert getattr(value, "__qualname__", "") == \
                    getattr(answers[name], "__qualname__", ""), f"{module.__name__}.{name}"


# Every name the stand-in answers itself: dropping one from it (it would then only warn) fails here.
_ANSWERED = """CUDAGraph CUDAPluggableAllocator Event ExternalStream MemPool Stream StreamContext
_dump_snapshot _get_memory_metadata _record_memory_history _set_allocator_settings
_set_memory_metadata _snapshot caching_allocator_alloc caching_allocator_delete
can_device_access_peer change_current_allocator clock_rate current_blas_handle current_device
current_solver_handle current_stream default_stream device device_count device_memory_used
device_of empty_cache get_allocator_backend get_arch_list get_device_capability get_device_name
get_device_properties get_gencode_flags get_per_process_memory_fraction get_rng_state
get_rng_state_all get_stream_from_external get_sync_debug_mode graph graph_pool_handle
host_memory_stats host_memory_stats_as_nested_dict init initial_seed ipc_collect is_available
is_bf16_supported is_current_stream_capturing is_initialized is_tf32_supported list_gpu_processes
make_graphed_callables manual_seed manual_seed_all mark max_memory_allocated max_memory_cached
max_memory_reserved mem_get_info memory_allocated memory_cached memory_reserved memory_snapshot
memory_stats memory_stats_as_nested_dict memory_summary memory_usage power_draw range range_end
range_pop range_push range_start reset_accumulated_host_memory_stats
reset_accumulated_memory_stats reset_max_memory_allocated reset_max_memory_cached
reset_peak_host_memory_stats reset_peak_memory_stats seed seed_all set_device
set_per_process_memory_fraction set_rng_state set_rng_state_all set_stream set_sync_debug_mode
stream synchronize temperature use_mem_pool utilization""".split()


def test_each_name_the_stand_in_answers_is_answered_not_warned():
    import torch.cuda.graphs
    import torch.cuda.memory
    import torch.cuda.nvtx
    import torch.cuda.random
    modules = [torch.cuda, torch.cuda.memory, torch.cuda.random, torch.cuda.graphs,
               torch.cuda.nvtx]
    with Tracer():
        for name in _ANSWERED:
            homes = [m for m in modules if name in vars(m)]
            for module in homes:  # (none: not in this release)
                qualname = getattr(vars(module)[name], "__qualname__", "")
                assert "unmodelled" not in qualname, f"{module.__name__}.{name} only warns"


def test_a_function_the_stand_in_does_not_know_warns_naming_it():
    with Tracer() as t:
        assert torch.cuda.cudart() is None
    assert any("torch.cuda.cudart() is not modelled" in w for w in t.warnings)


def test_memory_statistics_answer_from_the_traced_requests():
    with Tracer() as t:
        assert torch.cuda.memory_allocated() == 0
        a = torch.empty(1000, device="cuda")  # 4,000 bytes: 4,096 as PyTorch counts them
        b = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        assert torch.cuda.memory_allocated() == 4096 + MiB
        del b
        assert torch.cuda.memory_allocated() == 4096
        assert torch.cuda.max_memory_allocated() == 4096 + MiB
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == 4096
        stats = torch.cuda.memory_stats()
        assert stats["allocated_bytes.all.current"] == 4096 and stats["num_ooms"] == 0
        assert torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["peak"] == 4096
        free, total = torch.cuda.mem_get_info()
        assert total == t.card.total_memory and free == total - 4096
        assert "4096 bytes allocated" in torch.cuda.memory_summary()
        del a
    assert any("answers the allocated bytes" in w for w in t.warnings)


def test_caching_allocator_alloc_and_delete_are_requests():
    with Tracer() as t:
        pointer = torch.cuda.caching_allocator_alloc(3 * MiB)
        torch.cuda.caching_allocator_delete(pointer)
    assert [(r.action, r.size) for r in t.requests()] == [("alloc", 3 * MiB), ("free", 3 * MiB)]


def test_streams_in_every_form():
    with Tracer() as t:
        side = torch.cuda.Stream()
        with side:
            a = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(side):
            b = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.current_stream().wait_event(side.record_event())
        c = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        a.record_stream(torch.cuda.current_stream())
        host = torch.empty(8, pin_memory=True).pin_memory()
        assert not t.on_device(host) and torch.accelerator.current_stream() == \
            torch.cuda.current_stream()
        assert not torch.accelerator.current_stream().is_capturing()
        del a, b, c
    streams = [(r.size, r.stream) for r in t.requests() if r.action == "alloc"]
    assert streams == [(MiB, side.stream_id), (2 * MiB, side.stream_id), (4 * MiB, 0)]
    assert side.stream_id != 0
    assert any("record_stream()" in w and str(MiB) in w for w in t.warnings)


def test_a_scripts_own_memory_history_leaves_the_trace_intact(tmp_path):
    p = trace_cli(tmp_path, """
import torch
torch.cuda.memory._record_memory_history(max_entries=1000)
x = torch.empty(2**20, device="cuda")
y = torch.empty(2**21, device="cuda")
del x
print(len(torch.cuda.memory._snapshot()["device_traces"][0]), torch.cuda.memory_stats()["num_ooms"])
torch.cuda.memory._dump_snapshot("own.pickle")
torch.cuda.memory._record_memory_history(enabled=None)
""", "-o", "trace.pickle.gz")
    assert p.returncode == 0, p.stderr
    own = load(str(tmp_path / "own.pickle"))
    assert [(e["action"], e["size"]) for e in own["device_traces"][0]] == [
        ("alloc", 4 * MiB), ("alloc", 8 * MiB), ("free_requested", 4 * MiB),
        ("free_completed", 4 * MiB)]
    mine, theirs = allocsim.replay(str(tmp_path / "trace.pickle.gz")), \
        allocsim.replay(str(tmp_path / "own.pickle"))
    assert mine["memory_stats"]["allocated_bytes.all.peak"] == 12 * MiB == \
        theirs["memory_stats"]["allocated_bytes.all.peak"]


def test_a_cap_the_script_sets_reaches_the_replay(tmp_path):
    source = """
import sys, torch
torch.cuda.set_per_process_memory_fraction(float(sys.argv[1]))
assert torch.cuda.get_per_process_memory_fraction() == float(sys.argv[1])
x = torch.empty(2**30, dtype=torch.uint8, device="cuda")
"""
    p = trace_cli(tmp_path, source, "-o", "small.pickle.gz", "--", "0.01")
    assert p.returncode == 0, p.stderr
    assert allocsim.replay(str(tmp_path / "small.pickle.gz"), capacity="80GiB")["ooms"] == 1
    p = trace_cli(tmp_path, source, "-o", "large.pickle.gz", "--", "0.5")
    assert p.returncode == 0, p.stderr
    assert allocsim.replay(str(tmp_path / "large.pickle.gz"), capacity="80GiB")["ooms"] == 0


def test_empty_cache_reaches_the_replay(tmp_path):
    source = """
import sys, torch
x = torch.empty(100 * 2**20, dtype=torch.uint8, device="cuda")
del x
if sys.argv[1] == "empty":
    torch.cuda.empty_cache()
y = torch.empty(300 * 2**20, dtype=torch.uint8, device="cuda")
"""
    reserved = {}
    for how in ("empty", "keep"):
        p = trace_cli(tmp_path, source, "-o", f"{how}.pickle.gz", "--", how)
        assert p.returncode == 0, p.stderr
        report = allocsim.replay(str(tmp_path / f"{how}.pickle.gz"))
        reserved[how] = report["memory_stats"]["reserved_bytes.all.peak"]
    assert reserved == {"empty": 300 * MiB, "keep": 400 * MiB}


def test_a_mem_pool_serves_its_blocks_own_segments():
    def job(pooled):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool) if pooled else torch.cuda.stream(None):
            a = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        del a
        b = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        del b, pool
    peaks = {}
    for pooled in (True, False):
        with Tracer() as t:
            job(pooled)
        path = f"/tmp/allocsim_pool_{os.getpid()}_{pooled}.pickle"
        t.save(path)
        peaks[pooled] = allocsim.replay(path)["memory_stats"]["reserved_bytes.all.peak"]
        os.remove(path)
    assert peaks == {True: 4 * MiB, False: 2 * MiB}


@pytest.mark.parametrize("source, says", [
    ("import torch\ng = torch.cuda.CUDAGraph()\n", "CUDA graphs are not traced"),
    ("import torch\nwith torch.cuda.graph(None):\n    pass\n", "CUDA graphs are not traced"),
    ("import torch.distributed as dist\ndist.init_process_group('nccl')\n",
     "fake process group"),
    ("import torch.distributed as dist\ndist.init_process_group()\n", "fake process group"),
])
def test_cuda_graphs_and_nccl_are_refused_in_one_line(tmp_path, source, says):
    p = trace_cli(tmp_path, source, "-o", "t.pickle.gz")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and lines[0].startswith("allocsim trace: error")


def test_the_scripts_own_error_is_its_traceback_the_tracers_one_line(tmp_path):
    p = trace_cli(tmp_path, "import torch\nx = torch.randn(2, 4, device='cuda')\n"
                  "y = x @ torch.randn(3, 3, device='cuda')\n", "-o", "t.pickle.gz")
    assert p.returncode == 1
    assert "Traceback" in p.stderr and 'job.py", line 3' in p.stderr
    assert "/torch/" not in p.stderr and "a and b must have same reduction dim" in p.stderr
    p = trace_cli(tmp_path, "import torch\nx = torch.randn(4, device='cuda')\n"
                  "y = x[x > 0]\n", "-o", "t.pickle.gz")
    assert p.returncode == 2 and "job.py:3" in p.stderr and len(p.stderr.splitlines()) == 1


def test_patches_are_undone_when_installing_them_fails(monkeypatch):
    originals = (torch.cuda.is_available, torch.nn.Module._apply, torch.Tensor.record_stream,
                 torch.compile)

    def fail(self, *args):
        raise RuntimeError("half-way")
    monkeypatch.setattr(CudaStandin, "_install_accelerator", fail)
    with pytest.raises(RuntimeError, match="half-way"):
        with Tracer():
            pass
    assert (torch.cuda.is_available, torch.nn.Module._apply, torch.Tensor.record_stream,
            torch.compile) == originals
    monkeypatch.undo()
    with pytest.raises(ValueError):
        with Tracer():
            raise ValueError("the script's")
    assert (torch.cuda.is_available, torch.nn.Module._apply, torch.Tensor.record_stream,
            torch.compile) == originals


def test_a_release_outside_the_rules_is_warned_of(monkeypatch):
    for version, warned in (("2.11.0+cu130", False), ("2.14.1", False), ("2.13.0+cpu", False),
                            ("2.16.0a0+git1234", True), ("2.10.0", True)):
        monkeypatch.setattr(torch, "__version__", version)
        with Tracer() as t:
            pass
        assert any("kernel rules are of PyTorch 2.11 to 2.14" in w for w in t.warnings) == warned


# --- the script's choices ---

def test_an_optimizer_made_before_cuda_steps_the_moved_parameters():
    def job(first):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
        model[0].weight.tag = "mine"
        seen = []
        model[2].weight.register_hook(lambda g: seen.append(g.shape) or g)
        if first:
            opt = torch.optim.AdamW(model.parameters())
            weight = model[0].weight
            model.cuda()
            assert model[0].weight is weight and weight.tag == "mine"
            assert isinstance(weight, nn.Parameter)
        else:
            model.cuda()
            opt = torch.optim.AdamW(model.parameters())
        for _ in range(2):
            model(torch.randn(8, 256, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
        assert len(seen) == 2
        return len(opt.state)
    sizes = {}
    for first in (True, False):
        with Tracer() as t:
            assert job(first) == 4
        sizes[first] = sorted(s for s, _ in allocs(t))
    assert sizes[True] == sizes[False]


def _attention_whats(context):
    with Tracer() as t:
        q = torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float16)
        with context():
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    return [w for _, w in allocs(t)], allocs(t)


def test_the_attention_backend_the_script_chooses_is_followed():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    whats, _ = _attention_whats(lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION))
    assert "aten._scaled_dot_product_flash_attention.default" in whats
    whats, _ = _attention_whats(lambda: sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION))
    assert "aten._scaled_dot_product_efficient_attention.default" in whats
    whats, sized = _attention_whats(lambda: sdpa_kernel(SDPBackend.MATH))
    assert not any("flash" in w or "efficient" in w for w in whats)
    assert (2 * 4 * 128 * 128 * 4, "aten.bmm.default") in sized  # float32 scores
    assert (128 * 128, "aten.ones.default") in sized  # the causal mask, on the device
    try:
        # On sm90 cuDNN's comes first (as an H100 with PyTorch 2.11 chose); without it too, the
        # memory-efficient kernel.
        torch.backends.cuda.enable_flash_sdp(False)
        whats, _ = _attention_whats(lambda: torch.autograd.set_grad_enabled(True))
        assert "aten._scaled_dot_product_cudnn_attention.default" in whats
        torch.backends.cuda.enable_cudnn_sdp(False)
        whats, _ = _attention_whats(lambda: torch.autograd.set_grad_enabled(True))
        assert "aten._scaled_dot_product_efficient_attention.default" in whats
    finally:
        torch.backends.cuda.enable_flash_sdp(True)
        torch.backends.cuda.enable_cudnn_sdp(True)
    with pytest.raises(RuntimeError, match="No available kernel"):
        _attention_whats(_no_backend)


_SDP_SWITCHES = ("flash", "mem_efficient", "math", "cudnn")


@contextlib.contextmanager
def _no_backend():
    """Every attention backend switched off (and back on after)."""
    cuda = torch.backends.cuda
    saved = [getattr(cuda, f"{n}_sdp_enabled")() for n in _SDP_SWITCHES]
    for n in _SDP_SWITCHES:
        getattr(cuda, f"enable_{n}_sdp")(False)
    try:
        yield
    finally:
        for n, was in zip(_SDP_SWITCHES, saved):
            getattr(cuda, f"enable_{n}_sdp")(was)


def test_cudnn_switches_are_read():
    conv = lambda: nn.Conv2d(3, 8, 3).cuda()(torch.randn(1, 3, 16, 16, device="cuda"))  # noqa
    try:
        torch.backends.cudnn.enabled = False
        with Tracer() as t:
            conv()
        assert any("cudnn.enabled = False" in w for w in t.warnings)
        assert t.has_bounds
        torch.backends.cudnn.enabled = True
        torch.backends.cudnn.benchmark = True
        with Tracer() as t:
            conv()
        assert any("cudnn.benchmark = True" in w for w in t.warnings)
    finally:
        torch.backends.cudnn.enabled = True
        torch.backends.cudnn.benchmark = False


def test_deterministic_algorithms_make_cublas_refuse_as_on_a_gpu(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        torch.use_deterministic_algorithms(True)
        with pytest.raises(RuntimeError, match="CUBLAS_WORKSPACE_CONFIG"):
            with Tracer():
                nn.Linear(8, 8).cuda()(torch.randn(2, 8, device="cuda"))
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        with Tracer() as t:
            nn.Linear(8, 8).cuda()(torch.randn(2, 8, device="cuda"))
        assert [s for s, w in allocs(t) if w == "cuBLAS workspace"] == [4096 * 1024 * 8]
    finally:
        torch.use_deterministic_algorithms(False)


def test_a_custom_functions_backward_add_allocates():
    class AddNoise(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, noise):
            ctx.save_for_backward(noise)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g + ctx.saved_tensors[0], None
    with Tracer() as t:
        x = torch.randn(256, 256, device="cuda", requires_grad=True)
        AddNoise.apply(x, torch.randn(256, 256, device="cuda")).sin().sum().backward()
    assert (256 * 256 * 4, "aten.add.Tensor") in allocs(t)


# --- what the tracer does not model: bounded and said ---

def test_an_unmodelled_op_is_bounded_and_said(tmp_path):
    p = trace_cli(tmp_path, "import torch\nx = torch.randn(2**20, device='cuda')\n"
                  "v, i = x.sort()\n", "-o", "sort.pickle.gz")
    assert p.returncode == 0, p.stderr
    assert "cub's temporary storage not modelled" in p.stderr
    upper = tmp_path / "sort.upper.pickle.gz"
    assert upper.exists()
    lower_sizes = [e["size"] for e in load(str(tmp_path / "sort.pickle.gz"))["device_traces"][0]
                   if e["action"] == "alloc"]
    upper_sizes = [e["size"] for e in load(str(upper))["device_traces"][0]
                   if e["action"] == "alloc"]
    bound = 2 * (2**20 * 8 + 2**22) + MiB
    assert upper_sizes == lower_sizes + [bound]
    out = subprocess.run([sys.executable, "-m", "allocsim", "replay",
                          str(tmp_path / "sort.pickle.gz")], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=STAGED))
    assert "traced on a CPU: cub's temporary storage" in out.stderr
    assert "sort.upper.pickle.gz" in out.stderr


def test_fitting_says_may_not_fit_between_the_bounds(tmp_path):
    # 64 MiB of data and a sort of it: the trace fits under 200 MB, its upper bound does not
    p = trace_cli(tmp_path, "import sys, torch\nx = torch.randn(int(sys.argv[1]) * 2**20, "
                  "device='cuda')\nv, i = x.sort()\n", "-o", "s{value}.pickle.gz",
                  "--values", "1:16", "--fit-limit", "200000000", "--", "{value}")
    assert p.returncode == 0, p.stderr
    assert "may not fit" in p.stdout and "the largest value that may fit" in p.stdout


def _rnn_requests(t, what):
    return [(i, r) for i, r in enumerate(t.log.requests) if r.what == what]


def test_a_trained_rnn_is_bounded_and_its_reserve_held_through_its_backward():
    from allocsim.tracer.cudnn_rnns import RnnShape, reserve_upper, weight_bytes, workspace_upper
    with Tracer() as t:
        gru = nn.GRU(16, 32, num_layers=2, batch_first=True, bidirectional=True).cuda()
        out = gru(torch.randn(4, 10, 16, device="cuda"))[0]
        forward_end = len(t.log.requests)
        out.sum().backward()
    shape = RnnShape("gru", 2, 2, 16, 32, 0, 4, 10, 4, True, 0.0, True)
    held = reserve_upper(shape) + weight_bytes(shape)
    (a, alloc), (f, free) = _rnn_requests(t, "cuDNN gru reserve")
    assert (alloc.upper, free.upper, alloc.size, free.size) == (held, held, 0, 0)
    (w, workspace), _ = _rnn_requests(t, "cuDNN gru workspace")
    assert workspace.upper == workspace_upper(shape) and a < w < forward_end
    (b, backward), _ = _rnn_requests(t, "cuDNN gru backward workspace")
    # freed once every weight's gradient is made: after the backward's last gradient of one
    grads = [i for i, r in enumerate(t.log.requests) if i > forward_end and r.action == "alloc"
             and r.size == 3 * 32 * 16 * 4]  # weight_ih_l0's and its reverse's
    assert forward_end < max(grads) < b < f
    # the trace itself has none of it; the twin all of it, and the cause is bounded
    assert not any(w.startswith("cuDNN") for _, w in allocs(t))
    assert t.uncertain.bounded
    assert any("cuDNN's recurrent kernels not modelled" in w and "up to" in w
               for w in t.warnings)


def test_an_rnn_without_gradients_holds_no_reserve():
    with Tracer() as t:
        lstm = nn.LSTM(8, 16, proj_size=4).cuda()
        with torch.no_grad():
            lstm(torch.randn(5, 3, 8, device="cuda"))
        lstm.eval()
        lstm(torch.randn(5, 3, 8, device="cuda"))
    reserve = _rnn_requests(t, "cuDNN lstm reserve")
    # allocated and freed at once (no_grad), then none in eval (no reserve: upper 0)
    assert [r.action for _, r in reserve] == ["alloc", "free", "alloc", "free"]
    assert reserve[1][0] == reserve[0][0] + 3  # the workspace between
    assert reserve[2][1].upper < reserve[0][1].upper


def test_rnn_shapes_are_read_from_padded_and_packed_calls():
    from allocsim.tracer.cudnn_rnns import shape_of
    lstm = nn.LSTM(8, 16, num_layers=2, proj_size=4, batch_first=True, dropout=0.5)
    x = torch.randn(3, 7, 8)
    args = (x, (torch.zeros(2, 3, 4), torch.zeros(2, 3, 16)), lstm._flat_weights, True, 2, 0.5,
            True, False, True)
    shape, weights = shape_of("lstm", args)
    assert shape[:9] == ("lstm", 2, 1, 8, 16, 4, 3, 7, 4) and len(weights) == 10
    packed = nn.utils.rnn.pack_padded_sequence(x, [7, 5, 2], batch_first=True)
    args = (packed.data, packed.batch_sizes, (torch.zeros(2, 3, 4), torch.zeros(2, 3, 16)),
            lstm._flat_weights, True, 2, 0.5, True, False)
    shape, _ = shape_of("lstm", args)
    assert (shape.batch, shape.seq, shape.proj) == (3, 7, 4)
    gru = nn.GRU(8, 16, bias=False)
    shape, _ = shape_of("gru", (torch.randn(7, 8), torch.zeros(1, 16), gru._flat_weights, False,
                                1, 0.0, False, False, False))
    assert (shape.batch, shape.seq, shape.hidden, shape.proj) == (1, 7, 16, 0)
    assert shape_of("gru", (torch.randn(7, 8), "no weights")) is None


def test_rnn_bounds_cover_every_recorded_configuration():
    from allocsim.tracer.cudnn_rnns import (reserve_upper, shape_of_configuration,
                                            weight_bytes, workspace_upper)
    path = os.path.join(os.environ["ALLOCSIM_TEST_WORKLOADS"], "kernels", "rnn_h100.json.gz")
    checked = 0
    for result in json.load(gzip.open(path))["results"]:
        c = result["config"]
        shape = shape_of_configuration(c)
        for call in result.get("calls", []):
            if call["op"] != "_cudnn_rnn":
                continue
            freed = {e[2] for e in call["events"] if e[0] == "free_requested"}
            workspace = sum(e[1] for e in call["events"] if e[0] == "alloc" and e[2] in freed)
            assert workspace <= workspace_upper(shape), c
            assert (call["outputs"][3] or 0) <= reserve_upper(shape), c
            assert (call["outputs"][4] or 0) <= weight_bytes(shape), c
            checked += 1
    assert checked == 200


def test_a_compiled_region_is_bounded_by_its_outputs_and_its_eager_run():
    def job(compiled):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)).cuda()
        run = torch.compile(model) if compiled else model
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            run(torch.randn(64, 512, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
    with Tracer() as eager:
        job(False)
    with Tracer() as compiled:
        job(True)
    assert allocs(compiled, "upper") == allocs(eager)
    lower = sum(s for s, _ in allocs(compiled))
    assert lower < sum(s for s, _ in allocs(eager))
    # kept: the parameters' gradients (made in the region's backward, alive after it)
    assert sum(1 for s, w in allocs(compiled) if s == 2048 * 512 * 4) >= 4
    assert any("torch.compile's generated code not modelled" in w for w in compiled.warnings)


# --- the user jobs, each traced without a crash ---

_TORCH_ONLY = [("rnn_job.py", ["gru", "4", "1"], "recurrent kernels"),
               ("rnn_job.py", ["lstm-packed", "4", "1"], "recurrent kernels"),
               ("attention_job.py", ["math", "2", "1"], None),
               ("attention_job.py", ["no-flash", "2", "1"], None),
               ("optimizer_first_job.py", ["2", "1"], None),
               ("prefetcher_job.py", ["8", "2"], "record_stream"),
               ("self_recording_job.py", ["own.pickle", "2", "1"], "its own memory history"),
               ("capped_job.py", ["0.1", "4", "1"], None),
               ("custom_function_job.py", ["4", "1"], None),
               ("compiled_job.py", ["2", "1"], "torch.compile")]
_LIBRARIES = [("lightning_job.py", ["8", "1"], "lightning"),
              ("timm_job.py", ["vit_small_patch16_224", "2", "1"], "timm"),
              ("peft_job.py", ["2", "1"], "peft"),
              ("hf_trainer_job.py", ["2", "1"], "transformers")]


@pytest.mark.parametrize("script, args, warned", _TORCH_ONLY,
                         ids=[f"{s[:-3]}-{a[0]}" for s, a, _ in _TORCH_ONLY])
def test_a_user_job_traces(tmp_path, script, args, warned):
    out = str(tmp_path / "t.pickle.gz")
    p = subprocess.run([sys.executable, "-m", "allocsim.trace", os.path.join(JOBS, script),
                        "-o", out, "--", *args], capture_output=True, text=True, cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=STAGED))
    assert p.returncode == 0, p.stderr
    assert allocsim.replay(out)["ooms"] == 0
    if warned:
        assert warned in p.stderr


@pytest.mark.parametrize("script, args, library", _LIBRARIES,
                         ids=[s[:-3] for s, _, _ in _LIBRARIES])
def test_a_user_job_of_a_library_traces(tmp_path, script, args, library):
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed here")
    out = str(tmp_path / "t.pickle.gz")
    p = subprocess.run([sys.executable, "-m", "allocsim.trace", os.path.join(JOBS, script),
                        "-o", out, "--", *args], capture_output=True, text=True, cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=STAGED))
    assert p.returncode == 0, p.stderr[-3000:]
    assert allocsim.replay(out)["ooms"] == 0


def test_refusals_raise_trace_errors():
    with pytest.raises(TraceError, match="CUDA graphs"):
        with Tracer():
            torch.cuda.make_graphed_callables(nn.Linear(2, 2), (torch.randn(1, 2),))
