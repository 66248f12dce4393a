"""A LightningModule trained by Lightning's Trainer on one GPU: an MLP classifier over random
data, Adam, a few steps, no logger, checkpoints or progress bar. usage: lightning_job.py [BATCH]
[STEPS]"""
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.manual_seed(0)


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096),
                                 nn.ReLU(), nn.Linear(4096, 10))

    def training_step(self, batch, index):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


data = TensorDataset(torch.randn(batch * steps, 1024), torch.randint(0, 10, (batch * steps,)))
trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=steps, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(Classifier(), DataLoader(data, batch_size=batch))
print("done")
