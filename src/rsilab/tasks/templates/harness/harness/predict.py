"""predict --seed N  < inputs.jsonl > outputs.jsonl

Reads one {"id", "input"} object a line (input: a string) and writes one {"id", "output"}
line per input, in order: the string normalized as config.json (next to this file) says.
"""

import json
import string
import sys
from pathlib import Path

config = json.loads((Path(__file__).parent / "config.json").read_text())


def normalize(text: str) -> str:
    """``text`` with the steps config.json turns on."""
    if config.get("lowercase"):
        text = text.lower()
    if config.get("strip_punctuation"):
        text = text.translate(str.maketrans("", "", string.punctuation))
    if config.get("collapse_spaces"):
        text = " ".join(text.split())
    return text


for line in sys.stdin:
    if not line.strip():
        continue
    item = json.loads(line)
    print(json.dumps({"id": item["id"], "output": normalize(item["input"])}))
