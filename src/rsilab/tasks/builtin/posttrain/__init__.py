"""The ``posttrain`` task: post-train a small language model (SFT, LoRA, prompts, decoding).

**Base model.** A 0.56M-parameter Llama (d 128, 2 layers, byte-level BPE of 1024 tokens)
trained on a corpus about an invented world (``_corpus``: facts about 300 people, arithmetic
sentences and stories, function specs with example calls, tiny Python functions, quiz sheets
for the non-target kinds), built deterministically on the host by ``rsilab runtime install --task
posttrain`` into the task's runtime (``_base``), its sha256 recorded in the runtime's stamp.
Jobs read it there; the harness never rebuilds it.

**Benchmarks** (``_bench``; items of a tier name only entities or functions of its bucket,
see ``_world``): ``arith`` (target: word problems, the first integer of the output must be
the answer), ``fncall`` (a JSON call matched against the function's schema), ``facts`` (short
answers), ``choice`` (four options about the same facts), ``code`` (tiny Python functions run
against unit tests in the sandbox, ``python_tests``). Scored by generation with capped new
tokens.

**Harness.** ``train.py`` fine-tunes (full, or LoRA with peft) on the train tier with
per-kind mixture weights; ``predict.py`` prompts with few-shot examples and decodes greedily
or by sampling (self-consistency vote, or k programs for pass@k). The starting config
(``epochs`` 0) is the base model with few-shot prompts. The harness is generic over kinds and
also takes a local Hugging Face model folder (``base_model``): ``rsilab task init --kind lm``
copies it as the template for a user's own model.
"""

from __future__ import annotations

from rsilab.tasks import (
    Benchmark,
    GeneratedSplits,
    Knob,
    KnobCondition,
    Setting,
    Task,
    leaked_final_tier,
    task,
)
from rsilab.tasks.builtin.posttrain import _bench, _scorer
from rsilab.tasks.builtin.posttrain._base import build_id, install_base

HERE = __import__("pathlib").Path(__file__).parent
KINDS = ("arith", "fncall", "facts", "choice", "code")
"""The benchmarks, which are also the kinds of their items (``input["kind"]``)."""
RUNTIME_REQUIREMENTS = ["transformers==5.24.0", "tokenizers==0.23.3", "peft==0.21.2"]
"""What the harness imports beyond the base runtime (torch, numpy, safetensors)."""

TRAINS = KnobCondition(knob="epochs", at_least=1)
"""The recipe knobs matter only when the model trains (``epochs`` 0: the base, unchanged)."""
SAMPLES = KnobCondition(knob="decoding", one_of=["sample"])
"""The sampling knobs matter only when the decoding samples (greedy decodes once)."""
SEARCH_SPACE = [
    Knob(name="epochs", type="int", low=0, high=20, default=0),
    Knob(
        name="lr",
        type="float",
        low=1e-5,
        high=1e-2,
        log=True,
        default=1e-3,
        when=TRAINS,
        weakest=1e-5,
    ),
    Knob(name="lora_rank", type="choice", choices=[0, 4, 8, 16], default=0, when=TRAINS),
    Knob(name="batch_size", type="choice", choices=[8, 16, 32], default=16, when=TRAINS),
    *(
        Knob(name=f"mix_{k}", type="float", low=0.0, high=3.0, default=1.0, when=TRAINS)
        for k in KINDS
    ),
    Knob(name="replay", type="float", low=0.0, high=1.0, default=0.0, when=TRAINS),
    Knob(name="template", type="choice", choices=["qa", "plain"], default="qa"),
    Knob(name="few_shot", type="int", low=0, high=4, default=2),
    Knob(name="decoding", type="choice", choices=["greedy", "sample"], default="greedy"),
    Knob(name="temperature", type="float", low=0.1, high=1.5, default=0.7, when=SAMPLES),
    Knob(name="samples", type="int", low=1, high=8, default=1, when=SAMPLES),
    Knob(name="max_new_tokens", type="int", low=4, high=64, default=48),
]
"""The recipe and harness knobs (harness/config.json holds their starting values - the
``mix_<kind>`` weights it leaves out, at their default 1 - and the
per-kind token caps ``max_new_tokens_<kind>`` and ``aggregate_<kind>``, which stay fixed).
``when``: a knob that matters only under a condition on another (see :data:`TRAINS`,
:data:`SAMPLES`), so a search does not run the base again under a new learning rate."""


NON_TARGET_TOLERANCE = 0.05
"""The largest drop in a non-target's score (a share of its items) a candidate may make:
five items in a hundred. Smaller than the drops training on the target alone makes (facts
0.87 to 0.24, choice 0.24 to 0.07, fncall 0.79 to 0.72 in docs/posttrain.md), so the
regression guard is real; at 0 the controller would ask every non-target to be shown no worse
at all, which a noisy score left unchanged shows about one time in twenty."""


def _bench_of(name: str, scorer: str, target: bool, what: str) -> Benchmark:
    return Benchmark(
        name=name,
        description=what,
        scorer=scorer,
        target=target,
        tolerance=0.0 if target else NON_TARGET_TOLERANCE,
        samples=GeneratedSplits(name=f"posttrain.{name}", generate=getattr(_bench, name)),
    )


@task
def posttrain() -> Task:
    """SFT of a small Llama; target: arithmetic word problems; four non-targets."""
    assert _scorer.SCORERS  # registered on import; the benchmarks below name them
    return Task(
        name="posttrain",
        description="Post-train a 0.56M-parameter Llama, built offline from a shipped corpus, "
        "with SFT (full or LoRA), data mixtures, prompts and decoding.",
        goal="Raise exact-match accuracy on arithmetic word problems without losing the "
        "function-calling, factual, multiple-choice and coding benchmarks.",
        setting=Setting.BENCHMARK_GUIDED,
        harness=HERE / "harness",
        benchmarks=[
            _bench_of("arith", "number_match", True, "arithmetic word problems, exact number"),
            _bench_of("fncall", "json_call", False, "a JSON function call fitting the schema"),
            _bench_of("facts", "short_answer", False, "short answers about corpus facts"),
            _bench_of("choice", "choice_letter", False, "four-option questions on the facts"),
            _bench_of("code", "python_tests", False, "tiny Python functions, unit tested"),
        ],
        budget="experiments=12,wall=60m,tokens=2M",
        search_space=SEARCH_SPACE,
        traps=[leaked_final_tier()],
        runtime_requirements=RUNTIME_REQUIREMENTS,
        runtime_build=install_base,
        runtime_build_id=build_id(),
    )
