"""Plain SGD and Adam steps, written out.

torch.optim would do, but its first use imports torch._dynamo (about 3 s on a small CPU),
which would dominate an experiment this size.
"""

import torch


class Optimizer:
    """``step()`` after ``backward()``: updates every parameter, then clears its gradient."""

    def __init__(self, params: list, config: dict) -> None:
        self.params = params
        self.kind = config["optimizer"]
        self.lr = float(config["lr"])
        self.weight_decay = float(config["weight_decay"])
        self.t = 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            grad = p.grad + self.weight_decay * p
            if self.kind == "adam":
                m.mul_(0.9).add_(grad, alpha=0.1)
                v.mul_(0.999).addcmul_(grad, grad, value=0.001)
                m_hat = m / (1 - 0.9**self.t)
                v_hat = v / (1 - 0.999**self.t)
                p.sub_(self.lr * m_hat / (v_hat.sqrt() + 1e-8))
            else:
                p.sub_(self.lr * grad)
            p.grad = None
