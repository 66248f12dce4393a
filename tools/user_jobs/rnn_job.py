"""A sequence classifier over an RNN, as users write one: embedding, a recurrent stack, a linear
head, Adam. usage: rnn_job.py [gru|lstm|lstm-proj|lstm-packed|rnn] [BATCH] [STEPS]"""
import sys

import torch
from torch import nn

kind = sys.argv[1] if len(sys.argv) > 1 else "gru"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
torch.manual_seed(0)
SEQ, VOCAB, EMBED, HIDDEN = 128, 8000, 256, 512


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        if kind == "gru":
            self.rnn = nn.GRU(EMBED, HIDDEN, num_layers=2, batch_first=True, bidirectional=True)
            out = 2 * HIDDEN
        elif kind == "rnn":
            self.rnn = nn.RNN(EMBED, HIDDEN, num_layers=3, dropout=0.1)
            out = HIDDEN
        elif kind == "lstm-proj":
            self.rnn = nn.LSTM(EMBED, HIDDEN, num_layers=2, proj_size=128, batch_first=True)
            out = 128
        else:
            self.rnn = nn.LSTM(EMBED, HIDDEN, num_layers=3, dropout=0.2, batch_first=True)
            out = HIDDEN
        self.head = nn.Linear(out, 10)

    def forward(self, tokens, lengths=None):
        x = self.embed(tokens)
        if kind == "rnn":
            x = x.transpose(0, 1)
        if lengths is not None:
            x = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                  enforce_sorted=False)
        y, _ = self.rnn(x)
        if lengths is not None:
            y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True)
        if kind == "rnn":
            y = y.transpose(0, 1)
        return self.head(y[:, -1])


model = Classifier().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(steps):
    tokens = torch.randint(0, VOCAB, (batch, SEQ), device="cuda")
    labels = torch.randint(0, 10, (batch,), device="cuda")
    lengths = None
    if kind == "lstm-packed":
        # lengths fixed by the step (not drawn), as a bucketed loader gives them
        lengths = torch.tensor([SEQ - (i * 7 + step) % (SEQ // 2) for i in range(batch)])
    loss = nn.functional.cross_entropy(model(tokens, lengths), labels)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
