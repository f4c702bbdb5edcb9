"""Fine-tuning a sequence classifier for the classification tasks (bigcode's finetuning/*/train.py).

`args` (the task options), `job` (what one training is given) and `checkpoints` import no torch;
`classifier`, `worker` and `predict` do, and are imported only where a training or a prediction
runs. `launch` starts the worker processes (one per device, data-parallel as under
`accelerate launch`) and reads their progress."""
