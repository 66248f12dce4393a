"""transformers' Trainer on a small BERT masked-LM (built from its config, no download) over
random tokens: a few steps, no evaluation, saving or reporting. usage: hf_trainer_job.py [BATCH]
[STEPS]"""
import sys
import tempfile

import torch
from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 16
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.manual_seed(0)
config = BertConfig(num_hidden_layers=4, hidden_size=512, num_attention_heads=8,
                    intermediate_size=2048)
model = BertForMaskedLM(config)


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return batch * steps

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, config.vocab_size, (256,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch, max_steps=steps,
                             report_to=[], save_strategy="no", logging_strategy="no",
                             dataloader_num_workers=0, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=Tokens()).train()
print("done")
