"""Differential fuzzing of allocsim against the PyTorch it runs in: random allocation programs
(programs), run through PyTorch's CUDA caching allocator on a GPU and recorded through allocsim's
recorder (runner), replayed by allocsim and compared with what PyTorch did (compare), divergences
shrunk to short regression cases (driver). `python -m allocsim.fuzz --help` runs it; the generator
and the comparison need no GPU and no torch.
"""
