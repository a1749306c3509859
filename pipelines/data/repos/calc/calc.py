"""A tiny calculator: the example repository of pipelines/repo-envs.yaml."""


def add(a, b):
    return a + b


def mean(values):
    return sum(values) / len(values)


def clamp(x, lo, hi):
    return max(lo, x)
