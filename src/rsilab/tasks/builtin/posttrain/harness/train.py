"""SFT of the base model on DATA/train.jsonl: full fine-tuning or LoRA, per the config.

The model to start from: --model-in, else the config's base_model (a model file, or a
Hugging Face model folder), else the base model the task's runtime holds. Loss is on the
answer tokens (and the end token) only. Each kind's items are used ``mix_<kind>`` times
(default 1; 0 leaves a kind out; 1.5 repeats half of them). With epochs 0 the model is
written unchanged, with this config and the few-shot examples predict will use. With
``options_by`` "likelihood" (the default), items with options are learned, and shown as shots,
as their question without the options answered by the right option's text (``common.cloze``),
the form predict.py scores them in.

Replay: with ``replay`` r > 0, each epoch also learns r documents of plain text per SFT item
(every token, the language-modelling loss the model was pre-trained with), drawn at random
from ``replay_corpus`` (a text file whose documents are separated by two blank lines; unset:
the corpus the runtime's base model was trained on). Fine-tuning on a narrow task makes a
small model forget what it only knows from pre-training; replaying that text keeps it.

Training budget: ``max_train_examples`` (a fixed setting, not a knob to search; 0 or unset: no
limit) caps the sequences learned over all epochs, SFT items and replayed documents alike, so
an experiment's cost is bounded whatever epochs, mixture and replay ask for: training stops
when the budget is spent, and the learning rate decays to 0 over the steps that will run. The
model file records what was learned (``trained``: examples, steps, epochs begun).
"""

import argparse
import json
import random
from pathlib import Path

import torch
from common import (
    answer_text,
    base_model_path,
    check_config,
    cloze,
    device,
    dtype_of,
    kind_of,
    kinds_in,
    load_model,
    options_by,
    prompt,
    question_text,
    read_jsonl,
    replay_corpus_path,
    save_model,
    template_of,
    threads,
)


def mixture(rows: list[dict], config: dict, rng: random.Random) -> list[dict]:
    """The training items after the per-kind mixture weights."""
    chosen = []
    for kind in kinds_in(rows):
        items = [r for r in rows if kind_of(r["input"]) == kind]
        weight = float(config.get(f"mix_{kind}", 1.0))
        if weight < 0:
            raise SystemExit(f"config mix_{kind} is {weight}; use a weight of 0 or more")
        whole, part = int(weight), weight - int(weight)
        chosen += items * whole + rng.sample(items, round(part * len(items)))
    rng.shuffle(chosen)
    return chosen


def encode(row: dict, tok, config: dict) -> tuple[list[int], list[int]]:
    """(ids, labels): the zero-shot prompt masked out, the answer and the end token learned."""
    ask = prompt(row["input"], [], config)
    answer = template_of(config)[1].format(answer=answer_text(row["target"]))
    head = tok.encode(ask, add_special_tokens=False)
    tail = [*tok.encode(answer, add_special_tokens=False), tok.eos_token_id]
    return head + tail, [-100] * len(head) + tail


REPLAY_SEPARATOR = "\n\n\n"
"""Between the documents of a replay corpus."""
REPLAY_TOKENS = 128
"""A replayed document is cut to this many tokens (the end token counts)."""


def replay_documents(config: dict) -> list[str]:
    """The replay corpus's documents; [] when ``replay`` is 0."""
    share = float(config.get("replay", 0.0))
    if share < 0:
        raise SystemExit(f"config replay is {share}; use 0 (no replay) or more")
    if share == 0:
        return []
    path = replay_corpus_path(config)
    if not path.is_file():
        raise SystemExit(
            f"config replay is {share} but the replay corpus {path} does not exist: set"
            " replay_corpus to a text file of documents, or replay to 0"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SystemExit(
            f"the replay corpus {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8"
        ) from None
    documents = [d for d in text.split(REPLAY_SEPARATOR) if d.strip()]
    if not documents:
        raise SystemExit(f"the replay corpus {path} holds no text: fill it, or set replay to 0")
    return documents


def replayed(documents: list[str], count: int, tok, rng: random.Random) -> list:
    """``count`` documents drawn from ``documents``, encoded to learn every token."""
    chosen = []
    for text in rng.choices(documents, k=count):
        ids = [*tok.encode(text, add_special_tokens=False), tok.eos_token_id][:REPLAY_TOKENS]
        chosen.append((ids, list(ids)))
    return chosen


def batches(encoded: list, size: int, pad: int):
    for start in range(0, len(encoded), size):
        chunk = encoded[start : start + size]
        width = max(len(ids) for ids, _ in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        labels = torch.full((len(chunk), width), -100, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, (row_ids, row_labels) in enumerate(chunk):
            ids[i, : len(row_ids)] = torch.tensor(row_ids)
            labels[i, : len(row_labels)] = torch.tensor(row_labels)
            mask[i, : len(row_ids)] = 1
        yield ids.to(device()), labels.to(device()), mask.to(device())


def with_lora(model, rank: int):
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear")
    return get_peft_model(model, lora)


def train_budget(config: dict) -> int:
    """The most sequences one training may learn (``max_train_examples``); 0: no limit."""
    raw = config.get("max_train_examples", 0)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise SystemExit(
            f"config max_train_examples is {raw!r}; use a whole number of sequences (0: no limit)"
        )
    return raw


def sft(model, rows: list[dict], tok, config: dict, seed: int):
    """Fine-tune ``model`` on ``rows`` and the replayed text (linear decay of the learning
    rate to 0 over the steps the budget allows); (model, what was learned)."""
    rank = int(config.get("lora_rank", 0))
    width = int(getattr(model.config, "hidden_size", 0) or 0)
    if width and rank > width:  # a low-rank adapter wider than the model is not low-rank
        raise SystemExit(
            f"config lora_rank is {rank}; use at most the model's hidden size, {width} "
            "(0: full fine-tuning)"
        )
    if rank > 0:
        model = with_lora(model, rank)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=float(config["lr"]), weight_decay=0.0)
    encoded = [encode(r, tok, config) for r in rows]
    documents = replay_documents(config)
    per_epoch = round(float(config.get("replay", 0.0)) * len(encoded)) if documents else 0
    epochs, size = int(config["epochs"]), int(config["batch_size"])
    plan = epochs * (len(encoded) + per_epoch)
    planned = min(train_budget(config) or plan, plan)
    # the steps that will run: whole batches of each epoch, the last epoch cut at the budget
    total = max(1, _steps(planned, len(encoded) + per_epoch, size))
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / total))
    model.train()
    rng = random.Random(seed)
    learned = steps = begun = 0
    for _ in range(epochs):
        if learned >= planned:
            break
        begun += 1
        epoch = encoded + replayed(documents, per_epoch, tok, rng)
        rng.shuffle(epoch)
        epoch = epoch[: planned - learned]
        for ids, labels, mask in batches(epoch, size, tok.pad_token_id):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            steps += 1
        learned += len(epoch)
    model.eval()
    trained = {"examples": learned, "steps": steps, "epochs": begun}
    return (model.merge_and_unload() if rank > 0 else model), trained


def _steps(examples: int, per_epoch: int, size: int) -> int:
    """Optimizer steps to learn ``examples`` sequences in epochs of ``per_epoch``, batches of
    ``size`` (each epoch's last batch may be short)."""
    whole, rest = divmod(examples, per_epoch) if per_epoch else (0, 0)
    return whole * -(-per_epoch // size) + -(-rest // size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-in")
    parser.add_argument("--model-out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="config.json")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    check_config(config)  # a bad setting stops here, before minutes of loading and training
    train_budget(config)
    threads()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model, tok, meta = load_model(args.model_in or base_model_path(config), dtype_of(config))
    rows = read_jsonl(Path(args.data) / "train.jsonl")
    for row in rows:  # every item, not only those the mixture draws: a bad one is never quiet
        question_text(row.get("input"))
        if row.get("target") is None:
            raise SystemExit(
                f"train item {row.get('id')!r} has no target; give each item the answer to "
                'learn as "target"'
            )
    if options_by(config) == "likelihood":
        rows = [cloze(r) for r in rows]
    trained = {"examples": 0, "steps": 0, "epochs": 0}
    if int(config["epochs"]) > 0:
        model, trained = sft(model, mixture(rows, config, rng), tok, config, args.seed)
    shots = {}
    for kind in kinds_in(rows):
        mine = [r for r in rows if kind_of(r["input"]) == kind]
        shots[kind] = rng.sample(mine, min(int(config["few_shot"]), len(mine)))
    info = {**meta, "harness": config, "shots": shots, "trained": trained}
    save_model(args.model_out, model, tok, info)


if __name__ == "__main__":
    main()
