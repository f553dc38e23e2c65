"""all-MiniLM-L6-v2 in plain PyTorch: a 6-layer BERT encoder, mean pooling, a linear head.

Parameter names equal the checkpoint's (``embeddings.*``, ``encoder.layer.N.*``), so the
shipped ``model.safetensors`` loads with ``load_state_dict``; the head is ``head.weight`` and
``head.bias``. Sentence embeddings are the mask-weighted mean of the last layer, L2-normalised,
as the sentence-transformers model defines them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Embeddings(nn.Module):
    def __init__(self, vocab: int, hidden: int, positions: int, types: int, eps: float) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, ids: Tensor) -> Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        summed = (
            self.word_embeddings(ids)
            + self.position_embeddings(positions)[None]
            + self.token_type_embeddings(torch.zeros_like(ids))
        )
        normed: Tensor = self.LayerNorm(summed)
        return normed


class SelfAttention(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)


class AttentionOutput(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)


class Attention(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.self = SelfAttention(hidden)
        self.output = AttentionOutput(hidden, eps)


class Dense(nn.Module):
    def __init__(self, size_in: int, size_out: int) -> None:
        super().__init__()
        self.dense = nn.Linear(size_in, size_out)


class Output(AttentionOutput):
    def __init__(self, inner: int, hidden: int, eps: float) -> None:
        super().__init__(hidden, eps)
        self.dense = nn.Linear(inner, hidden)


class Layer(nn.Module):
    """One transformer block (post-LayerNorm, exact GELU, as in BERT)."""

    def __init__(self, hidden: int, inner: int, heads: int, eps: float, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.attention = Attention(hidden, eps)
        self.intermediate = Dense(hidden, inner)
        self.output = Output(inner, hidden, eps)

    def _split(self, x: Tensor) -> Tensor:
        batch, length, hidden = x.shape
        return x.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        attn = self.attention
        p = self.dropout if self.training else 0.0
        q, k, v = (
            self._split(proj(x)) for proj in (attn.self.query, attn.self.key, attn.self.value)
        )
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        context = context.transpose(1, 2).reshape(x.shape)
        x = attn.output.LayerNorm(x + F.dropout(attn.output.dense(context), p, self.training))
        inner = F.gelu(self.intermediate.dense(x))
        out: Tensor = self.output.LayerNorm(
            x + F.dropout(self.output.dense(inner), p, self.training)
        )
        return out


class Encoder(nn.Module):
    def __init__(self, layers: list[Layer]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(layers)


class MiniLM(nn.Module):
    """Encoder plus classification head over ``labels``."""

    def __init__(self, config: dict[str, object], labels: list[str], pooling: str = "mean") -> None:
        super().__init__()

        def num(key: str) -> int:
            return int(str(config[key]))

        hidden, eps = num("hidden_size"), float(str(config["layer_norm_eps"]))
        dropout = float(str(config["hidden_dropout_prob"]))
        self.embeddings = Embeddings(
            num("vocab_size"), hidden, num("max_position_embeddings"), num("type_vocab_size"), eps
        )
        blocks = [
            Layer(hidden, num("intermediate_size"), num("num_attention_heads"), eps, dropout)
            for _ in range(num("num_hidden_layers"))
        ]
        self.encoder = Encoder(blocks)
        self.head = nn.Linear(hidden, max(len(labels), 1))
        self.labels = labels
        self.pooling = pooling

    def hidden_states(self, ids: Tensor, mask: Tensor, grad_from: int = 0) -> Tensor:
        """Last layer's token states; ``mask`` is 1 for tokens, 0 for padding.

        The embeddings and the layers below index ``grad_from`` run without autograd (they
        are frozen), which makes training a top slice of the encoder cheaper.
        """
        keep = mask.bool()[:, None, None, :]
        with torch.set_grad_enabled(torch.is_grad_enabled() and grad_from <= 0):
            x: Tensor = self.embeddings(ids)
        for index, block in enumerate(self.encoder.layer):
            with torch.set_grad_enabled(torch.is_grad_enabled() and index >= grad_from):
                x = block(x, keep)
        return x

    def pool(self, states: Tensor, mask: Tensor) -> Tensor:
        """``mean`` over real tokens (the sentence-embedding rule) or the ``cls`` token."""
        if self.pooling == "cls":
            return states[:, 0]
        weights = mask.unsqueeze(-1).to(states.dtype)
        return (states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)

    def embed(self, ids: Tensor, mask: Tensor) -> Tensor:
        """L2-normalised sentence embeddings."""
        return F.normalize(self.pool(self.hidden_states(ids, mask), mask), dim=-1)

    def forward(self, ids: Tensor, mask: Tensor, grad_from: int = 0) -> Tensor:
        """Class logits (see :meth:`hidden_states` for ``grad_from``)."""
        pooled = self.pool(self.hidden_states(ids, mask, grad_from), mask)
        logits: Tensor = self.head(F.dropout(pooled, 0.1, self.training))
        return logits


def read_config(model_dir: Path) -> dict[str, object]:
    """The checkpoint's ``config.json``."""
    data = json.loads((model_dir / "config.json").read_text("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{model_dir / 'config.json'} is not a JSON object")
    return data
