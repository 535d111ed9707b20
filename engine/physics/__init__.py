"""The physics of a training step: the model's shape, memory, kernels, collectives, pipeline schedule and FLOPs."""
