"""A real local HTTP server that answers LLM requests from a script, for tests.

It speaks both the OpenAI chat-completions protocol (``POST /v1/chat/completions``) and
Anthropic's Messages protocol (``POST /v1/messages``), so the real SDK clients can be tested
end to end without a network. A Messages request with ``"stream": true`` is answered with
server-sent events, as Anthropic streams (``message_start``, ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``) / ``content_block_stop`` for
each block, ``message_delta`` with the stop reason and usage, ``message_stop``), so a coding
agent's CLI (Claude Code) can be driven offline too. Each such request takes the next step
of the script, whichever protocol it came in::

    with ScriptedServer([RateLimited(0.01), Reply("hello")]) as server:
        model = OpenAIChat("m", api_key="k", base_url=server.openai_base_url)
        ...
        assert server.requests[-1].body["messages"][0]["content"] == "hi"

Steps: :class:`Reply` (text and/or tool calls; a call whose ``arguments`` is a string is sent
verbatim, so it may be malformed, see :func:`malformed_tool_call`), :class:`RateLimited`
(HTTP 429 with a retry-after), :class:`ServerError` (5xx, or any status), :class:`Stall`
(answer only after a delay, to outlast a client's timeout) and :class:`Respond` (a function
of the request that returns one of the others, so a script can answer with ids that earlier
tool results returned: see :meth:`RecordedRequest.tool_results`). A request that finds the
script empty, or whose :class:`Respond` function raises, gets HTTP 400, which clients do not
retry, so a test fails fast.

Requests that are not conversations take no step and are recorded apart
(:attr:`ScriptedServer.other_requests`): ``POST /v1/messages/count_tokens`` is answered with
an estimate (a token per 4 bytes of the body), and any ``GET`` or ``HEAD`` (a client's probe
of the server) with an empty JSON object; other paths get 404.

The server binds 127.0.0.1 on a free port and serves each request in its own thread.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

Protocol = Literal["openai", "anthropic"]
_PATHS: dict[str, Protocol] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
COUNT_TOKENS = "/v1/messages/count_tokens"
STREAM_CHUNK = 16
"""Characters of text (or of a tool call's JSON) per streamed delta, so clients must join."""


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call in a scripted reply; a string ``arguments`` is sent as it is."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful answer; ``finish_reason`` None means the protocol's usual word."""

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    tokens_in: int = 10
    tokens_out: int = 5
    finish_reason: str | None = None


@dataclass(frozen=True)
class RateLimited:
    """HTTP 429 asking the client to wait ``retry_after_s`` seconds."""

    retry_after_s: float = 0.0


@dataclass(frozen=True)
class ServerError:
    """An HTTP error status (5xx by default) with a protocol-shaped error body."""

    status: int = 500
    message: str = "scripted server error"


@dataclass(frozen=True)
class Stall:
    """Answer ``then`` only after ``seconds`` (the client has usually given up by then)."""

    seconds: float
    then: Reply = Reply("late reply")


Answer = Reply | RateLimited | ServerError | Stall
"""What a :class:`Respond` function may return."""


@dataclass(frozen=True)
class Respond:
    """Answer with what ``fn`` makes of the request (called in the server's handler thread).

    ``fn`` gets the :class:`RecordedRequest` (protocol and parsed body) and returns the step
    that answers it; an exception it raises becomes an HTTP 400 naming it.
    """

    fn: Callable[[RecordedRequest], Answer]


Step = Reply | RateLimited | ServerError | Stall | Respond


def tool_call(name: str, arguments: dict[str, Any] | None = None) -> Reply:
    """A reply that is one well-formed tool call."""
    return Reply(tool_calls=(ScriptedToolCall(name, arguments or {}),))


def malformed_tool_call(name: str, raw: str = '{"path": "a.txt"') -> Reply:
    """A reply that is one tool call whose arguments are not valid JSON.

    Over the Anthropic protocol ``raw`` takes the place of the ``input`` object, as a string.
    """
    return Reply(tool_calls=(ScriptedToolCall(name, raw),))


@dataclass(frozen=True)
class SeenToolResult:
    """A tool result a request carried back to the model, with the call it answers."""

    name: str
    """The tool called ('' when the call is not in the request's history)."""
    arguments: str
    """The call's arguments as the request echoed them (JSON text)."""
    content: str
    is_error: bool
    """As the Anthropic protocol marks it; always False over OpenAI's, which has no mark."""

    def first_line_json(self) -> Any:
        """The content's first line as JSON: rsilab's agent loop puts the tool's answer there
        (and its budget footer on the last line). Raises ValueError when it is not JSON."""
        return json.loads(self.content.split("\n", 1)[0])

    def arguments_json(self) -> Any:
        """The call's arguments as JSON. Raises ValueError when they are not JSON."""
        return json.loads(self.arguments)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received, whatever step answered it.

    The helpers read the body the same way for both protocols, so a :class:`Respond`
    function need not care which client sent it.
    """

    protocol: Protocol
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: dict[str, Any]

    def system_text(self) -> str:
        """The system prompt(s), joined by blank lines."""
        if self.protocol == "anthropic":
            system = self.body.get("system", "")
            return system if isinstance(system, str) else "\n\n".join(_texts(system))
        return "\n\n".join(
            str(m.get("content") or "") for m in self.body["messages"] if m["role"] == "system"
        )

    def user_texts(self) -> list[str]:
        """The text of every user turn, in order (tool results are not user text)."""
        out: list[str] = []
        for message in self.body["messages"]:
            if message["role"] != "user":
                continue
            content = message.get("content")
            out += [content] if isinstance(content, str) else _texts(content or [])
        return out

    def tool_names(self) -> list[str]:
        """The tools offered with the request."""
        tools = self.body.get("tools", [])
        if self.protocol == "anthropic":
            return [t["name"] for t in tools]
        return [t["function"]["name"] for t in tools]

    def tool_results(self) -> list[SeenToolResult]:
        """Every tool result of the conversation, oldest first, named by the call it answers."""
        calls: dict[str, tuple[str, str]] = {}
        out: list[SeenToolResult] = []
        for message in self.body["messages"]:
            if self.protocol == "openai":
                for call in message.get("tool_calls") or []:
                    function = call["function"]
                    calls[call["id"]] = (function["name"], function["arguments"])
                if message["role"] == "tool":
                    name, args = calls.get(message["tool_call_id"], ("", ""))
                    out.append(SeenToolResult(name, args, message["content"], False))
                continue
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block["type"] == "tool_use":
                    calls[block["id"]] = (block["name"], json.dumps(block["input"]))
                elif block["type"] == "tool_result":
                    name, args = calls.get(block["tool_use_id"], ("", ""))
                    text = block["content"]
                    text = text if isinstance(text, str) else "\n".join(_texts(text))
                    out.append(SeenToolResult(name, args, text, bool(block.get("is_error"))))
        return out


def _texts(blocks: Iterable[Any]) -> list[str]:
    """The text of Anthropic content blocks (other blocks are skipped)."""
    texts = (b for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    return [str(b.get("text", "")) for b in texts]


class ScriptedServer:
    """The server; start it with ``with`` (or :meth:`start`) and stop it with :meth:`close`.

    Thread-safe: steps may be added while it serves; :attr:`requests` is a snapshot.
    """

    def __init__(self, steps: Iterable[Step] = ()) -> None:
        self._steps: deque[Step] = deque(steps)
        self._requests: list[RecordedRequest] = []
        self._others: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.closing = threading.Event()
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.script = self
        # A short poll interval: shutdown() waits for the next poll, and tests close often.
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.02,), name="scripted-llm", daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``; the Anthropic SDK takes it as its ``base_url``."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for the OpenAI SDK (it adds ``/chat/completions``)."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` for the Anthropic SDK (it adds ``/v1/messages``)."""
        return self.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    @property
    def other_requests(self) -> list[tuple[str, str]]:
        """``(method, path)`` of every request that took no step (probes, token counts)."""
        with self._lock:
            return list(self._others)

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        with self._lock:
            return len(self._steps)

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    def start(self) -> ScriptedServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; stalled answers are dropped and handler threads are joined."""
        self.closing.set()
        if self._thread.is_alive():
            self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _take(self, request: RecordedRequest) -> tuple[int, Step | None]:
        """Record ``request``; its serial number (from 1) and the step that answers it."""
        with self._lock:
            self._requests.append(request)
            return len(self._requests), self._steps.popleft() if self._steps else None

    def _note(self, method: str, path: str) -> None:
        with self._lock:
            self._others.append((method, path))


class _HTTPServer(ThreadingHTTPServer):
    script: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is part of the script, not a failure.
        pass


class _Handler(BaseHTTPRequestHandler):
    timeout = 10  # a client that never finishes its request does not hold close() forever

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read the recorded requests, not a log on stderr

    def do_GET(self) -> None:
        cast(_HTTPServer, self.server).script._note("GET", self.path)
        self._send(200, {})

    def do_HEAD(self) -> None:
        cast(_HTTPServer, self.server).script._note("HEAD", self.path)
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "0")
            self.end_headers()
        except OSError:
            pass

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        if path == COUNT_TOKENS:
            size = int(self.headers.get("content-length", 0))
            self.rfile.read(size)
            cast(_HTTPServer, self.server).script._note("POST", self.path)
            self._send(200, {"input_tokens": max(1, size // 4)})
            return
        protocol = _PATHS.get(path)
        if protocol is None:
            self._send(404, {"error": {"message": f"no such path {self.path}"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        except json.JSONDecodeError as exc:
            self._send(400, _error(protocol, "invalid_request_error", f"bad JSON: {exc}"))
            return
        script = cast(_HTTPServer, self.server).script
        headers = {name.lower(): value for name, value in self.headers.items()}
        recorded = RecordedRequest(protocol, self.path, headers, body)
        serial, step = script._take(recorded)
        self._answer(recorded, step, serial, script.closing)

    def _answer(
        self,
        request: RecordedRequest,
        step: Step | None,
        serial: int,
        closing: threading.Event,
    ) -> None:
        protocol, body = request.protocol, request.body
        if step is None:
            message = "scripted server: the script has no step left for this request"
            self._send(400, _error(protocol, "invalid_request_error", message))
        elif isinstance(step, RateLimited):
            headers = {
                "retry-after-ms": str(round(step.retry_after_s * 1000)),
                "retry-after": str(math.ceil(step.retry_after_s)),
            }
            self._send(429, _error(protocol, "rate_limit_error", "slow down"), headers)
        elif isinstance(step, ServerError):
            self._send(step.status, _error(protocol, "api_error", step.message))
        elif isinstance(step, Stall):
            if not closing.wait(step.seconds):
                self._answer(request, step.then, serial, closing)
        elif isinstance(step, Respond):
            try:
                made: Step = step.fn(request)
            except Exception as exc:  # the script's own bug: fail the test's request fast
                message = f"scripted server: the Respond step raised {type(exc).__name__}: {exc}"
                self._send(400, _error(protocol, "invalid_request_error", message))
                return
            self._answer(request, made, serial, closing)
        else:
            model = str(body.get("model", "scripted"))
            if protocol == "openai":
                self._send(200, _openai(step, model, serial))
            elif body.get("stream") is True:
                self._stream(_anthropic_events(_anthropic(step, model, serial)))
            else:
                self._send(200, _anthropic(step, model, serial))

    def _stream(self, events: Iterable[dict[str, Any]]) -> None:
        """Send ``events`` as server-sent events, then close the connection (HTTP/1.0)."""
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for event in events:
                line = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                self.wfile.write(line.encode())
            self.wfile.flush()
        except OSError:
            pass  # the client gave up

    def _send(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a Stall outlasted its timeout)


def _error(protocol: Protocol, kind: str, message: str) -> dict[str, Any]:
    if protocol == "openai":
        return {"error": {"message": message, "type": kind, "code": None}}
    return {"type": "error", "error": {"type": kind, "message": message}}


def _openai(reply: Reply, model: str, serial: int) -> dict[str, Any]:
    calls = [
        {
            "id": call.id or f"call_{serial}_{i}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(call.arguments),
            },
        }
        for i, call in enumerate(reply.tool_calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if calls:
        message["tool_calls"] = calls
    finish = reply.finish_reason or ("tool_calls" if calls else "stop")
    return {
        "id": f"chatcmpl-{serial}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": reply.tokens_in,
            "completion_tokens": reply.tokens_out,
            "total_tokens": reply.tokens_in + reply.tokens_out,
        },
    }


def _anthropic(reply: Reply, model: str, serial: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, call in enumerate(reply.tool_calls):
        arguments: object = call.arguments
        if isinstance(arguments, str):
            # Malformed: the string stays where the object should be.
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments)
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{serial}_{i}",
                "name": call.name,
                "input": arguments,
            }
        )
    stop = reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn")
    return {
        "id": f"msg_{serial}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.tokens_in, "output_tokens": reply.tokens_out},
    }


def _anthropic_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The streamed form of a Messages answer: every block started, sent in deltas of
    :data:`STREAM_CHUNK` characters and stopped, then the stop reason and usage."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        opened: dict[str, Any]
        if block["type"] == "text":
            opened, text, kind, key = {"type": "text", "text": ""}, block["text"], "text", "text"
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            given = block["input"]
            text = given if isinstance(given, str) else json.dumps(given)
            kind, key = "input_json", "partial_json"
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        for at in range(0, len(text), STREAM_CHUNK):
            delta = {"type": f"{kind}_delta", key: text[at : at + STREAM_CHUNK]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}
    )
    events.append({"type": "message_stop"})
    return events
