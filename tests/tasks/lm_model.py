"""A tiny stand-in for a user's own language model: a Hugging Face model folder built here.

A one-layer Llama (hidden size 32) from a transformers config, with a byte-level BPE
tokenizer trained locally (tokenizers) on a few lines; saved with save_pretrained, so the
folder has the layout of any downloaded model (config.json, tokenizer files, safetensors).
Nothing is downloaded. About 80 kB; built in seconds.
"""

from __future__ import annotations

from pathlib import Path

_TEXT = [
    "Question: What is 12 plus 30?\nAnswer: 42",
    "Question: Spell 'cat' backwards.\nAnswer: tac",
    "Question: Which of these is a fruit?\nA. pear\nB. saw\nAnswer: A",
]


def make_model_folder(out: Path, hidden: int = 32, layers: int = 1) -> Path:
    """Write the model folder to ``out`` (tiny by default; the GPU check asks for a larger
    ``hidden`` size and more ``layers``); returns it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<|eos|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_TEXT * 10, trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, eos_token="<|eos|>", pad_token="<|pad|>"
    )
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    fast.save_pretrained(out)
    return out
