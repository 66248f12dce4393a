"""cuDNN's recurrent kernels (GRU, LSTM and RNN layers on CUDA), bounded from above.

What cuDNN allocates beside an RNN call's outputs follows its own choice of kernel, which no rule
here reproduces: a workspace (freed at the end of the call; the backward takes one of the same size
twice, for the data and for the weights), a reserve it keeps for the backward (training only), a
flat copy of the weights where they are not one buffer already, and the dropout states once per
device. The workspace and the reserve are bounded by linear envelopes of the call's shape
measured over 200 random configurations on an H100 (workloads/kernels/rnn_h100.json.gz);
tools/fit_rnn_bounds.py fits them and checks each on configurations left out of its fit.

The trace keeps the CPU kernel's tensors (its lower bound). The upper-bound twin adds, at each
call, the workspace's bound, the reserve's bound and the weights' bytes held until the layer's
backward has made every weight's gradient (to the end of the trace where no backward runs; at
once where no gradient is wanted), the workspace's bound again in that backward, and the dropout
states once."""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import torch

# A layer's gates per hidden unit: LSTM 4, GRU 3, the plain RNNs 1
_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
# cuDNN's dropout states on a device: 49,152 bytes per multiprocessor (6,488,064 on the H100's
# 132, as recorded)
_DROPOUT_STATE_PER_SM = 49152

# The envelopes' coefficients over envelope_features(): fitted by tools/fit_rnn_bounds.py on all
# 200 recorded configurations, then widened by the margin that covered every configuration left
# out in its four-fold check (the workspace x1.5, the reserve x1.25).
WORKSPACE_UPPER = (1.0882e08, 7.2183e06, 1.3861, 1.1658, 0.0)
RESERVE_UPPER = (0.0, 5.8341e06, 1.3032, 0.0, 0.18094)


class RnnShape(NamedTuple):
    mode: str  # "lstm", "gru", "rnn_tanh", "rnn_relu"
    layers: int
    directions: int
    input_size: int
    hidden: int
    proj: int  # 0: no projection
    batch: int  # the largest batch (a packed sequence's first)
    seq: int  # the longest sequence
    element_size: int
    has_biases: bool
    dropout: float
    train: bool


_ELEMENT_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2}


def shape_of_configuration(c: dict) -> RnnShape:
    """The shape of one configuration of workloads/kernels/rnn_h100.json.gz (biases on, as
    tools/gpu/record_rnn_kernels.py makes its layers)."""
    return RnnShape(c["mode"].lower(), c["layers"], 2 if c["bidirectional"] else 1, c["input"],
                    c["hidden"], c["proj"], c["batch"], c["seq"], _ELEMENT_SIZES[c["dtype"]],
                    True, c["dropout"], c["train"])


def weight_bytes(s: RnnShape) -> int:
    """The layers' weights (and biases) in one flat buffer."""
    gates = _GATES[s.mode] * s.hidden
    out = s.proj or s.hidden
    per_direction = []
    for layer in range(s.layers):
        inputs = s.input_size if layer == 0 else s.directions * out
        n = gates * (inputs + out) + (2 * gates if s.has_biases else 0)
        n += out * s.hidden if s.proj else 0
        per_direction.append(n)
    return sum(per_direction) * s.directions * s.element_size


def envelope_features(s: RnnShape) -> Tuple[float, ...]:
    """What the envelopes are linear in: a constant, the layers (and directions), the
    activations of every step of every layer, the weights, and one step's activations."""
    stacks = s.layers * s.directions
    width = _GATES[s.mode] * s.hidden + 2 * (s.proj or s.hidden)
    return (1.0, float(stacks), float(stacks * s.seq * s.batch * width * s.element_size),
            float(weight_bytes(s)), float(stacks * s.batch * width * s.element_size))


def _dot(coefficients: Sequence[float], features: Sequence[float]) -> int:
    return int(sum(c * f for c, f in zip(coefficients, features)))


def workspace_upper(s: RnnShape) -> int:
    return _dot(WORKSPACE_UPPER, envelope_features(s))


def reserve_upper(s: RnnShape) -> int:
    return _dot(RESERVE_UPPER, envelope_features(s)) if s.train else 0


def shape_of(mode: str, args: Sequence[Any]) -> Optional[Tuple[RnnShape, List[torch.Tensor]]]:
    """The shape of a call of torch._VF's `mode` (lstm, gru, rnn_tanh, rnn_relu), padded or
    packed, and its weights; None where the arguments are not the forms PyTorch's modules pass."""
    packed = (len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].dim() == 1 and
              not args[1].is_floating_point())
    try:
        if packed:
            data, batch_sizes, _, weights, has_biases, layers, dropout, train, bidirectional = \
                args[:9]
            seq = batch_sizes.numel()
            batch = int(batch_sizes[0]) if seq else 0
        else:
            data, _, weights, has_biases, layers, dropout, train, bidirectional, batch_first = \
                args[:9]
            if data.dim() == 2:  # unbatched
                seq, batch = data.shape[0], 1
            else:
                seq, batch = ((data.shape[1], data.shape[0]) if batch_first else
                              (data.shape[0], data.shape[1]))
        weights = [w for w in weights if isinstance(w, torch.Tensor)]
        directions = 2 if bidirectional else 1
        per_stack = len(weights) // max(1, layers * directions)
        has_proj = per_stack in (3, 5)
        gates_hidden, input_size = weights[0].shape
        hidden = gates_hidden // _GATES[mode]
        proj = weights[per_stack - 1].shape[0] if has_proj else 0
    except (ValueError, TypeError, IndexError, RuntimeError):
        return None
    return (RnnShape(mode, int(layers), directions, int(input_size), int(hidden), int(proj),
                     int(batch), int(seq), data.element_size(), bool(has_biases),
                     float(dropout), bool(train)), weights)


class CudnnRnns:
    """The upper-bound twin's allocations of the cuDNN RNN calls a script makes."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.dropout_states = False  # made once per device, kept

    def before(self, func: Any, args: Sequence[Any]) -> Optional[int]:
        """Called as the script calls `func` (one of torch._VF's RNNs) on the device: the twin's
        allocations for it, the largest a call adds (None: a form not known, unbounded)."""
        from .uncertain import RNN
        tracer = self.tracer
        mode = getattr(func, "__name__", "")
        found = shape_of(mode, args) if mode in _GATES else None
        if found is None:
            tracer.uncertain.note(RNN, None, tracer.where())
            return None
        shape, weights = found
        log, stream, what = tracer.log, tracer.stream.stream_id, f"cuDNN {mode}"
        if shape.dropout > 0 and shape.train and not self.dropout_states:
            self.dropout_states = True
            log.alloc(0, stream, what + " dropout states",
                      upper=_DROPOUT_STATE_PER_SM * tracer.card.multi_processor_count)
        held = reserve_upper(shape) + weight_bytes(shape)
        workspace = workspace_upper(shape)
        wanted = torch.is_grad_enabled() and any(
            t.requires_grad for t in weights + [a for a in args[:1] if isinstance(a, torch.Tensor)])
        reserve = log.alloc(0, stream, what + " reserve", upper=held)
        temporary = log.alloc(0, stream, what + " workspace", upper=workspace)
        log.free(temporary, 0, stream, what + " workspace", upper=workspace)
        if not (wanted and shape.train):
            log.free(reserve, 0, stream, what + " reserve", upper=held)
        elif all(w.is_leaf for w in weights if w.requires_grad):
            self._hold_until_backward([w for w in weights if w.requires_grad], reserve, held,
                                      workspace, stream, what)
        # else weights made by the script's own ops: the reserve held to the end of the trace
        tracer.uncertain.note(RNN, held + workspace, tracer.where())
        return held + workspace

    def _hold_until_backward(self, weights: List[torch.Tensor], reserve: int, held: int,
                             workspace: int, stream: int, what: str) -> None:
        """Frees the reserve once the backward has accumulated every weight's gradient (hooks
        after accumulation: a hook on the gradient itself would keep it, and the engine would
        then copy it instead of taking it, a change to the trace)."""
        log = self.tracer.log
        handles: List[Any] = []
        waiting = {id(w) for w in weights}

        def accumulated(weight: torch.Tensor) -> None:
            waiting.discard(id(weight))
            if waiting or not handles:
                return
            while handles:
                handles.pop().remove()
            temporary = log.alloc(0, stream, what + " backward workspace", upper=workspace)
            log.free(temporary, 0, stream, what + " backward workspace", upper=workspace)
            log.free(reserve, 0, stream, what + " reserve", upper=held)

        handles.extend(w.register_post_accumulate_grad_hook(accumulated) for w in weights)
