"""Build the base model: a byte-level BPE tokenizer and a small Llama trained on the corpus.

Deterministic on one machine: fixed seeds, a fixed thread count, deterministic algorithms,
the corpus pinned by hash. The result is one safetensors file (the model format of the
harness): the weights, and in its metadata the ``transformers`` config JSON and the tokenizer
JSON, so the file alone is the model and its sha256 names it. Built once, on the host, by
``rsilab runtime install --task posttrain`` into the task's runtime (see :func:`install_base`);
jobs read it there and never rebuild it.

Variants: ``full`` (d 128, 2 layers, 4 heads, 1024 tokens; 557,696 parameters; 1,400 steps of
16 x 256 tokens after 100 warm-up steps: 256-token rows, because few-shot prompts run past
128 tokens) and ``tiny`` (d 32, 1 layer, 320 tokens) for tests, trained on the tiny corpus
for a few steps.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsilab.errors import UserError
from rsilab.tasks.builtin.posttrain._corpus import CORPUS_SHA256, DOC_SEPARATOR, corpus

BASE_DIR = "share/rsilab-posttrain"
"""Folder of the base model inside the task's runtime (``sys.prefix`` in a job)."""
BASE_FILE = "base.safetensors"
CORPUS_FILE = "corpus.txt"
"""The base model's training text beside it (documents separated by :data:`DOC_SEPARATOR`),
what the harness's ``replay`` draws from (``harness/common.py``: ``RUNTIME_CORPUS``)."""
SPECIALS = ["<|pad|>", "<|eos|>"]
METADATA_KEY = "lm"
"""The file's one metadata entry: JSON with ``config`` (the transformers config as an
object), ``tokenizer`` (the tokenizer JSON as text), ``special`` (its end and padding
tokens) and ``base`` (the variant); a trained model adds ``harness`` (its config) and
``shots`` (few-shot examples per kind). The harness reads this format (``common.py``)."""


@dataclass(frozen=True)
class Variant:
    """Sizes of one base model build."""

    corpus: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    steps: int
    batch: int
    seq: int
    lr: float
    threads: int
    warmup: int = 0
    """Steps of linear warm-up before the cosine decay."""


VARIANTS = {
    "full": Variant("full", 1024, 128, 2, 4, 1400, 16, 256, 3e-3, 1, warmup=100),
    "tiny": Variant("tiny", 320, 32, 1, 2, 30, 8, 64, 5e-3, 1),
}


def build_tokenizer(text: str, vocab: int) -> Any:
    """A byte-level BPE over ``text``; digits split one by one (arithmetic reads them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text.split(DOC_SEPARATOR), trainer)
    return tok


def _config(variant: Variant, vocab: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=variant.hidden,
        intermediate_size=variant.hidden * 3,
        num_hidden_layers=variant.layers,
        num_attention_heads=variant.heads,
        num_key_value_heads=variant.heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )


def _train(model: Any, ids: list[int], variant: Variant, log: Callable[[str], None]) -> None:
    import torch

    data = torch.tensor(ids[: len(ids) // variant.seq * variant.seq]).view(-1, variant.seq)
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=variant.lr, weight_decay=0.01)
    model.train()
    for step in range(variant.steps):
        if step < variant.warmup:
            lr = variant.lr * (step + 1) / variant.warmup
        else:
            done = (step - variant.warmup) / max(1, variant.steps - variant.warmup)
            lr = variant.lr * 0.5 * (1 + math.cos(math.pi * done))
        for group in opt.param_groups:
            group["lr"] = lr
        rows = data[torch.randint(len(data), (variant.batch,), generator=gen)]
        loss = model(input_ids=rows, labels=rows).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == variant.steps - 1:
            log(f"step {step}: loss {loss.item():.3f}")


def build_base(out: Path, variant_name: str = "full", log: Callable[[str], None] = print) -> str:
    """Build the base model of ``variant_name`` into the file ``out``; its sha256.

    Raises:
        CorpusChanged: the corpus generator no longer matches its pin.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    variant = VARIANTS[variant_name]
    started = time.monotonic()
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(variant.threads)
    torch.use_deterministic_algorithms(True)
    try:
        text = corpus(variant.corpus)
        tok = build_tokenizer(text, variant.vocab)
        eos = tok.token_to_id("<|eos|>")
        ids: list[int] = []
        for doc in text.split(DOC_SEPARATOR):
            ids += [*tok.encode(doc).ids, eos]
        config = _config(variant, tok.get_vocab_size())
        model = LlamaForCausalLM(config)
        log(f"{sum(p.numel() for p in model.parameters())} parameters, {len(ids)} tokens")
        _train(model, ids, variant, log)
    finally:
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)
    weights = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    weights.pop("lm_head.weight", None)  # tied to the embedding
    # one metadata key: safetensors writes its metadata map in no fixed order
    info = {"config": json.loads(config.to_json_string()), "tokenizer": tok.to_str(),
            "special": {"eos_token": SPECIALS[1], "pad_token": SPECIALS[0]},
            "base": variant_name}  # fmt: skip
    meta = {METADATA_KEY: json.dumps(info, sort_keys=True)}
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out), metadata=meta)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    log(f"base model {variant_name}: sha256 {digest} in {time.monotonic() - started:.0f} s")
    return digest


VARIANT_ENV = "RSILAB_POSTTRAIN_BASE"
"""Which variant the runtime's build step builds: ``full`` (unset: the task's base) or ``tiny``
(seconds to build: ``make test`` installs it, as the suite's tests need the runtime, not the
full model). The variant is part of the build id, so a tiny base never passes for the full
one: with the variable unset, a runtime holding the tiny base is not installed."""


class UnknownVariant(UserError):
    """:data:`VARIANT_ENV` names no variant."""


def installed_variant() -> str:
    """The variant the build step builds (see :data:`VARIANT_ENV`).

    Raises:
        UnknownVariant: the variable names no variant.
    """
    name = os.environ.get(VARIANT_ENV) or "full"
    if name not in VARIANTS:
        raise UnknownVariant(
            f"{VARIANT_ENV}={name!r} names no posttrain base",
            f"unset it (the full base) or set it to one of: {', '.join(VARIANTS)}",
        )
    return name


def build_id() -> str:
    """What names a base-model build: the variant, the corpus's pin and this module's source
    (the sizes in :data:`VARIANTS` and the training loop). An installed runtime whose stamp
    holds another id is not installed: ``rsilab runtime install --task posttrain`` builds the
    base again."""
    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"{installed_variant()} base, corpus {CORPUS_SHA256[:12]}, build {source[:12]}"


def install_base(runtime: Path, log: Callable[[str], None] = print) -> dict[str, str]:
    """The task's runtime build step: the base model (:func:`installed_variant`) into
    ``runtime``/:data:`BASE_DIR`, and beside it (:data:`CORPUS_FILE`) the corpus it was
    trained on, which the harness replays during SFT; what the runtime's stamp records (each
    file's path and sha256)."""
    variant = installed_variant()
    out = runtime / BASE_DIR / BASE_FILE
    digest = build_base(out, variant, log)
    text = runtime / BASE_DIR / CORPUS_FILE
    text.write_text(corpus(VARIANTS[variant].corpus), encoding="utf-8")
    return {
        "posttrain_base": str(out),
        "posttrain_base_sha256": digest,
        "posttrain_corpus": str(text),
        "posttrain_corpus_sha256": hashlib.sha256(text.read_bytes()).hexdigest(),
    }
