"""A data prefetcher on a side stream, as image-training scripts write one: a DataLoader with
pinned memory, each batch copied to the GPU on a second stream, the main stream waiting for it
and record_stream() telling the allocator the batch is used there. usage: prefetcher_job.py
[BATCH] [STEPS]"""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
torch.manual_seed(0)
data = TensorDataset(torch.randn(batch * steps, 3 * 64 * 64), torch.randint(0, 100, (batch * steps,)))
loader = DataLoader(data, batch_size=batch, pin_memory=True, num_workers=0)


class Prefetcher:
    def __init__(self, loader):
        self.loader = iter(loader)
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        try:
            x, y = next(self.loader)
        except StopIteration:
            self.next = None
            return
        with torch.cuda.stream(self.stream):
            self.next = (x.cuda(non_blocking=True), y.cuda(non_blocking=True))

    def __next__(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        batch = self.next
        if batch is None:
            raise StopIteration
        for t in batch:
            t.record_stream(torch.cuda.current_stream())
        self.preload()
        return batch

    def __iter__(self):
        return self


model = nn.Sequential(nn.Linear(3 * 64 * 64, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                      nn.Linear(2048, 100)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for x, y in Prefetcher(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
