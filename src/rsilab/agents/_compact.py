"""History compaction: which older turns give way to a summary the model writes itself.

Sizes are estimated, not tokenised (characters / 4): providers tokenise differently and the
threshold only has to be roughly right to keep a conversation inside its context window.
"""

from __future__ import annotations

from collections.abc import Sequence

from rsilab.agents.llm import Message

CHARS_PER_TOKEN = 4
SUMMARY_MAX_CHARS = 2000
"""How much of a summary the ledger event keeps (its ``detail``)."""

SUMMARY_INSTRUCTION = (
    "Your conversation is getting long; older turns will be replaced by your own summary. "
    "Summarise your progress so far, for yourself: the task, what you did (tools called, with "
    "the record ids they returned), what the results showed, what is still open, and what you "
    "planned next. Quote numbers only as the tools reported them. Do not call tools now; "
    "answer in plain text, in at most 300 words."
)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough token count of ``messages``: their characters (text and tool calls) / 4."""
    chars = 0
    for message in messages:
        chars += len(message.content)
        chars += sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return chars // CHARS_PER_TOKEN


def split_for_summary(body: Sequence[Message], keep_tokens: int) -> int | None:
    """Where to cut ``body`` (the conversation after the system prompt) for a summary.

    Returns the index of the first message to keep: ``body[:i]`` is replaced by the summary and
    ``body[i:]`` stays. The kept tail is the longest suffix estimated at ``keep_tokens`` or
    fewer, moved forward so that it starts with an assistant message (a tool result never
    loses the call it answers, and the tail follows the summary's user turn). The tail may be
    empty. None when nothing would be dropped.
    """
    start, kept = len(body), 0
    while start > 0:
        kept += estimate_tokens(body[start - 1 : start])
        if kept > keep_tokens:
            break
        start -= 1
    while start < len(body) and body[start].role != "assistant":
        start += 1
    return start if start > 1 else None


def summary_message(summary: str, task_prompt: str) -> Message:
    """The user turn that takes the place of the summarised history; it restates the task."""
    return Message(
        role="user",
        content=(
            "Summary of your earlier work (older turns were replaced by it):\n"
            f"{summary}\n\nYour task in this step, as given:\n{task_prompt}"
        ),
    )


def fallback_summary(dropped: Sequence[Message]) -> str:
    """A mechanical summary, for a model that answered the summary request without text."""
    calls = [c.name for m in dropped for c in m.tool_calls]
    listed = ", ".join(calls[-30:]) if calls else "none"
    return f"(no summary was written) Tool calls in the dropped turns, latest last: {listed}."
