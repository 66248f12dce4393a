"""The user jobs (tools/user_jobs/) as they are recorded and traced: name -> (script, arguments,
whether the script records its own history). {snapshot} stands for the path of a self-recording
script's own snapshot."""

JOBS = {
    "gru": ("rnn_job.py", ["gru", "32", "3"], False),
    "lstm": ("rnn_job.py", ["lstm", "32", "3"], False),
    "lstm-proj": ("rnn_job.py", ["lstm-proj", "32", "3"], False),
    "lstm-packed": ("rnn_job.py", ["lstm-packed", "32", "3"], False),
    "rnn-tanh": ("rnn_job.py", ["rnn", "32", "3"], False),
    "attention-math": ("attention_job.py", ["math", "8", "3"], False),
    "attention-math-flag": ("attention_job.py", ["math-flag", "8", "3"], False),
    "attention-no-flash": ("attention_job.py", ["no-flash", "8", "3"], False),
    "attention-default": ("attention_job.py", ["default", "8", "3"], False),
    "optimizer-first": ("optimizer_first_job.py", ["16", "3"], False),
    "prefetcher": ("prefetcher_job.py", ["64", "4"], False),
    "self-recording": ("self_recording_job.py", ["{snapshot}", "16", "3"], True),
    "capped": ("capped_job.py", ["0.1", "32", "3"], False),
    "custom-function": ("custom_function_job.py", ["32", "3"], False),
    "compiled": ("compiled_job.py", ["16", "3"], False),
    "lightning": ("lightning_job.py", ["64", "3"], False),
    "timm-vit-small": ("timm_job.py", ["vit_small_patch16_224", "32", "3"], False),
    "timm-efficientnet-b0": ("timm_job.py", ["efficientnet_b0", "32", "3"], False),
    "peft-lora-gpt2": ("peft_job.py", ["8", "3"], False),
    "hf-trainer-bert": ("hf_trainer_job.py", ["16", "3"], False),
}
