"""A KernelBench-style task: y = relu(x) * 2 + bias (bias a parameter)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.relu(x) * 2 + self.bias


def get_inputs():
    return [torch.randn(5, 100)]


def get_init_inputs():
    return [100]
