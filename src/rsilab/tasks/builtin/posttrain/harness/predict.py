"""Read {"id", "input"} lines on stdin; write {"id", "output"} lines: generated text.

The config (stored in the model file by train.py) sets the decoding: ``decoding`` "greedy"
(one decode per item, whatever ``samples`` says) or "sample" (``samples`` decodes per item
at ``temperature``). With several samples, ``aggregate_<kind>`` (default ``aggregate``,
default "vote") is "vote" (self-consistency: the most frequent text is the output) or "all"
(the output is the list of samples, e.g. for pass@k). New tokens are capped per kind (see
``common.new_tokens``); the text is cut at the first blank line or end token. The scorers
extract the answer; this file never does. Items with options are answered, with
``options_by`` "likelihood" (the default), by the letter of the option whose text is the most
likely answer to the question asked without the options (summed log-probability of its
tokens after the prompt; deterministic, whatever the decoding), and with "letter" by
generating like any other item.
"""

import argparse
import json
import sys

import torch
from common import (
    LETTERS,
    SEPARATOR,
    check_config,
    cloze,
    device,
    has_options,
    kind_of,
    load_model,
    new_tokens,
    options_by,
    prompt,
    template_of,
    threads,
    vote,
)
from transformers import StoppingCriteria, StoppingCriteriaList


class StopAtSeparator(StoppingCriteria):
    """Ends a row once its new text holds the separator (the end token ends it anyway)."""

    def __init__(self, tok, start: int) -> None:
        self.tok, self.start = tok, start

    def __call__(self, input_ids, scores, **kwargs):
        texts = self.tok.batch_decode(input_ids[:, self.start :])
        done = [SEPARATOR in t for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def generate(model, tok, prompts: list[str], limit: int, config: dict) -> list[list[str]]:
    """Per prompt, the list of its decoded samples (one when greedy)."""
    sample = config.get("decoding", "greedy") == "sample"
    count = max(1, int(config.get("samples", 1))) if sample else 1
    encoded = [tok.encode(p, add_special_tokens=False) for p in prompts]
    width = max(len(ids) for ids in encoded)
    ids = torch.full((len(encoded), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for i, row in enumerate(encoded):  # left padding: every prompt ends at the last column
        ids[i, width - len(row) :] = torch.tensor(row)
        mask[i, width - len(row) :] = 1
    options = {"do_sample": False}
    if sample:
        options = {"do_sample": True, "temperature": float(config.get("temperature", 0.7)),
                   "top_k": 0, "num_return_sequences": count}  # fmt: skip
    with torch.no_grad():
        out = model.generate(
            input_ids=ids.to(device()),
            attention_mask=mask.to(device()),
            max_new_tokens=limit,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            stopping_criteria=StoppingCriteriaList([StopAtSeparator(tok, width)]),
            **options,
        )
    texts = []
    for row in out[:, width:].tolist():
        row = row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
        texts.append(tok.decode(row).split(SEPARATOR)[0].strip())
    return [texts[i * count : (i + 1) * count] for i in range(len(prompts))]


def option_letters(model, tok, items: list[dict], shots: list[dict], config: dict) -> list[str]:
    """Per item (each with options), the letter of its most likely option: the summed
    log-probability of the option's answer text after the prompt of its question without the
    options (shots in the same form), as train.py learns it."""
    answer = template_of(config)[1]
    rows, spans = [], []
    shown = [cloze(s) for s in shots]
    for item in items:
        if len(item["input"]["options"]) > len(LETTERS):
            raise SystemExit(f"item {item['id']} has {len(item['input']['options'])} options; "
                             f"at most {len(LETTERS)} can be answered by letter")  # fmt: skip
        asked = {k: v for k, v in item["input"].items() if k != "options"}
        head = tok.encode(prompt(asked, shown, config), add_special_tokens=False)
        for option in item["input"]["options"]:
            tail = tok.encode(answer.format(answer=str(option)), add_special_tokens=False)
            spans.append((len(head), len(head) + len(tail)))
            rows.append(head + tail)
    scores = []
    batch = max(1, int(config.get("predict_batch", 32)))
    for start in range(0, len(rows), batch):
        chunk, where = rows[start : start + batch], spans[start : start + batch]
        width = max(len(r) for r in chunk)
        ids = torch.full((len(chunk), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, row in enumerate(chunk):  # right padding: positions stay those of training
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        with torch.no_grad():
            logits = model(input_ids=ids.to(device()), attention_mask=mask.to(device())).logits
        logp = torch.log_softmax(logits.float(), dim=-1).cpu()
        for i, (begin, end) in enumerate(where):
            targets = ids[i, begin:end]
            scores.append(float(logp[i, begin - 1 : end - 1].gather(1, targets[:, None]).sum()))
    letters, at = [], 0
    for item in items:
        count = len(item["input"]["options"])
        mine = scores[at : at + count]
        letters.append(LETTERS[max(range(count), key=mine.__getitem__)])
        at += count
    return letters


def combine(samples: list[str], config: dict, kind: str):
    """One output from an item's samples: the vote, or the list of them all."""
    how = config.get(f"aggregate_{kind}", config.get("aggregate", "vote"))
    if how not in ("vote", "all"):
        raise SystemExit(f"config aggregate_{kind} is {how!r}; use 'vote' or 'all'")
    if how == "all" and len(samples) > 1:
        return samples
    return vote(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    threads()
    torch.manual_seed(args.seed)
    model, tok, meta = load_model(args.model)
    model.eval()
    config, shots = meta.get("harness", {}), meta.get("shots", {})
    check_config(config)  # what train.py wrote; checked again for a model made elsewhere
    batch = int(config.get("predict_batch", 32))
    items = [json.loads(line) for line in sys.stdin if line.strip()]
    outputs: dict[str, object] = {}
    for kind in sorted({kind_of(i["input"]) for i in items}):
        mine = [i for i in items if kind_of(i["input"]) == kind]
        if options_by(config) == "likelihood":
            chosen = [i for i in mine if has_options(i["input"])]
            mine = [i for i in mine if not has_options(i["input"])]
            for item, letter in zip(chosen, option_letters(model, tok, chosen, shots.get(kind, []),
                                                           config), strict=True):  # fmt: skip
                outputs[item["id"]] = letter
        limit = new_tokens(config, kind)
        for start in range(0, len(mine), batch):
            chunk = mine[start : start + batch]
            prompts = [prompt(i["input"], shots.get(kind, []), config) for i in chunk]
            for item, samples in zip(chunk, generate(model, tok, prompts, limit, config),
                                     strict=True):  # fmt: skip
                outputs[item["id"]] = combine(samples, config, kind)
    for item in items:
        sys.stdout.write(json.dumps({"id": item["id"], "output": outputs[item["id"]]}) + "\n")


if __name__ == "__main__":
    main()
