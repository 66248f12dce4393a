"""The tracer's one error: a program that cannot be traced, with where and why in its message."""


class TraceError(RuntimeError):
    """The program cannot be traced (it reads data a trace does not have, or asks for what a
    trace cannot follow); the message says where, and what to do instead."""
