"""The ``lm`` kind of ``rsilab task init``: the built-in posttrain harness around a user's model.

The harness files are copied from ``rsilab/tasks/builtin/posttrain/harness/`` when the task
is made (so the task keeps working as written when rsilab's copy changes). The user's model
folder (Hugging Face layout: ``config.json``, tokenizer files, ``*.safetensors``) is copied
into ``harness/base_model/`` and named in ``config.json`` as ``base_model``: jobs run in a
sandbox that shows them the harness copy and the runtime, never a folder of the user's, and
the copy travels with every experiment's workspace (a large model costs its size each time).
The task's ``runtime_requirements`` are the posttrain task's (transformers, tokenizers,
peft, pinned).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rsilab.errors import UserError

POSTTRAIN_HARNESS = Path(__file__).parent / "builtin" / "posttrain" / "harness"
"""The harness the lm kind copies."""
MODEL_DIR = "base_model"
"""Where the model folder lands in the harness (``base_model`` in config.json names it)."""
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def check_model_folder(model: Path) -> None:
    """Nothing when ``model`` looks like a Hugging Face model folder the harness can load.

    Raises:
        UserError: not a folder, no ``config.json`` with a ``model_type``, no tokenizer
            file, or no ``*.safetensors`` weights (pickled ``*.bin`` weights are refused).
    """
    hint = "save it with save_pretrained(FOLDER) (model and tokenizer) and pass that folder"
    if not model.is_dir():
        raise UserError(f"--model {model}: not a folder", hint)
    try:
        config = json.loads((model / "config.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--model {model}: no readable config.json ({exc})", hint) from exc
    if not isinstance(config, dict) or "model_type" not in config:
        raise UserError(f"--model {model}: config.json names no model_type", hint)
    if not any((model / name).is_file() for name in _TOKENIZER_FILES):
        raise UserError(f"--model {model}: no tokenizer.json or tokenizer_config.json", hint)
    if not list(model.glob("*.safetensors")):
        pickled = " (only pickled *.bin weights, which rsilab never loads)"
        raise UserError(
            f"--model {model}: no *.safetensors weights"
            + (pickled if list(model.glob("*.bin")) else ""),
            "save it with save_pretrained(FOLDER, safe_serialization=True)",
        )
    for path in sorted(model.rglob("*")):
        if path.is_symlink() and not path.exists():
            raise UserError(
                f"--model {model}: {path.relative_to(model)} is a link to "
                f"{os.readlink(path)}, which does not exist",
                "remove the link, or copy the folder with its links followed (cp -rL)",
            )
    for weights in sorted(model.glob("*.safetensors")):
        problem = safetensors_problem(weights)
        if problem:
            raise UserError(
                f"--model {model}: {weights.name} is not a safetensors file ({problem})",
                "save it with save_pretrained(FOLDER, safe_serialization=True)",
            )


MAX_HEADER = 100_000_000
"""A safetensors header longer than this is refused, as the safetensors library does."""


def safetensors_problem(path: Path) -> str:
    """What makes ``path`` not a safetensors file ("" when its header reads): the format is
    an 8-byte little-endian header length, then that many bytes of a JSON object."""
    try:
        with open(path, "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            if length <= 0 or length > MAX_HEADER or length > path.stat().st_size - 8:
                return f"a header length of {length} bytes"
            header = json.loads(handle.read(length))
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    except ValueError:
        return "its header is not JSON"
    return "" if isinstance(header, dict) else "its header is not a JSON object"


def write_lm_harness(folder: Path, model: Path, in_place: bool = False) -> list[Path]:
    """Copy the posttrain harness and ``model`` into ``folder/harness``, point its config at
    the model and fill in the task's runtime requirements; the files written.

    ``in_place``: the model is not copied; task.toml names it as the task's ``model`` (every
    job sees it read-only where it is) and the config's ``base_model`` is its absolute path:
    for a model too large to travel with every experiment's workspace.
    """
    from rsilab.tasks.builtin.posttrain import RUNTIME_REQUIREMENTS

    harness = folder / "harness"
    written = []
    for path in sorted(POSTTRAIN_HARNESS.iterdir()):
        if path.is_file() and path.suffix in (".py", ".toml", ".json"):
            harness.mkdir(parents=True, exist_ok=True)
            written.append(Path(shutil.copyfile(path, harness / path.name)))
    if in_place:
        base = str(model.resolve())
        model_line = (
            f"model = {json.dumps(base)}  # seen read-only by every job, where it is; "
            "its digest is recorded in each campaign"
        )
    else:
        shutil.copytree(model, harness / MODEL_DIR, ignore=shutil.ignore_patterns("*.bin", ".*"))
        written += sorted(p for p in (harness / MODEL_DIR).rglob("*") if p.is_file())
        base = MODEL_DIR  # relative: the job's working directory is the harness
        model_line = "# your model: copied into harness/base_model (see README.md)"
    config_path = harness / "config.json"
    config = json.loads(config_path.read_text("utf-8"))
    config["base_model"] = base
    # posttrain's budget is sized to its 0.56M-parameter base on 2 cores; a user's own model
    # and data start without one (README.md says how to set it)
    config["max_train_examples"] = 0
    config_path.write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    toml = folder / "task.toml"
    lines = json.dumps(list(RUNTIME_REQUIREMENTS))  # a JSON list of strings is a TOML array
    text = toml.read_text("utf-8").replace("{{runtime_requirements}}", lines)
    toml.write_text(text.replace("{{model_line}}", model_line), "utf-8")
    return written
