"""allocsim.trace: a PyTorch program's requests of the CUDA caching allocator, traced on the CPU
(no GPU, no device memory) and written as a trace that replay, plan, predict and fleet read."""

from .cards import CARDS, Card
from .requests import Request
from .tracer import TraceError, Tracer

__all__ = ["CARDS", "Card", "Request", "TraceError", "Tracer"]
