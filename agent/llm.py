"""LLM proposer through litellm: any provider/model string litellm knows.

The key comes from ``api_key`` (the editor's settings) or from the provider's usual environment
variable, which litellm reads itself. It is never written anywhere by this module: error
messages are scrubbed of it before they are returned, and the run record redacts it again.
Token counts come from the response's ``usage``; dollars from ``litellm.completion_cost``, or
from ``input_cost_per_token`` / ``output_cost_per_token`` when litellm has no price for the
model (then ``Proposal.priced`` is False if neither is known).

litellm is imported lazily (3+ s), with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that the
import does not fetch the price table from the network.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from .prompts import PromptContext, ReplyError, build_messages, parse_reply
from .proposers import Proposal, Request
from .records import Candidate

# litellm exception class names after which a retry can help.
_RETRYABLE = {"RateLimitError", "APIConnectionError", "Timeout", "APITimeoutError",
              "ServiceUnavailableError", "InternalServerError", "APIError",
              "BadGatewayError"}


def import_litellm():
    """Import litellm with the local price map and its console chatter off."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # noqa: PLC0415 - deliberately lazy

    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    return litellm


@dataclass
class LLMProposer:
    """Proposes rewrites of the whole file with an LLM.

    Args:
        model: litellm model string (``"openai/gpt-4o"``, ``"anthropic/claude-..."``, ...).
        api_key / api_base: passed to litellm when given (else litellm's environment lookup).
        temperature, max_tokens: sampling settings.
        retries: extra attempts after a transient error (rate limit, timeout, 5xx), waiting
            ``backoff * 2**attempt`` seconds (capped at 60 s) between them.
        timeout: seconds per HTTP request.
        input_cost_per_token / output_cost_per_token: US dollars, for models litellm cannot
            price.
    """

    model: str
    launcher: str
    path: str
    device: str
    shapes: list[dict]
    dtypes: list[Any]
    api_key: str | None = field(default=None, repr=False)
    api_base: str | None = None
    temperature: float = 0.7
    max_tokens: int = 8192
    retries: int = 3
    backoff: float = 2.0
    timeout: float = 300.0
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    last_messages: list[dict[str, str]] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return f"llm:{self.model}"

    def observe(self, candidate: Candidate, score: float | None, passed: bool) -> None:
        """The LLM learns through the prompt (feedback and history), not here."""

    def _scrub(self, text: str) -> str:
        if self.api_key:
            text = text.replace(self.api_key, "***")
        return text

    def propose(self, request: Request) -> Proposal:
        """One chat completion -> at most one candidate (the reply's code block)."""
        ctx = PromptContext(kernel=request.parent.kernel, launcher=self.launcher,
                            path=self.path, device=self.device, shapes=self.shapes,
                            dtypes=self.dtypes, parent_source=request.parent.source,
                            parent_feedback=request.parent_feedback,
                            last_feedback=request.last_feedback, last_id=request.last_id,
                            strategy=request.strategy, history=request.history,
                            best_score=request.best_score)
        messages = build_messages(ctx)
        self.last_messages = messages
        litellm = import_litellm()
        kwargs: dict[str, Any] = dict(model=self.model, messages=messages,
                                      temperature=self.temperature, max_tokens=self.max_tokens,
                                      timeout=self.timeout, num_retries=0)
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.api_base:
            kwargs["api_base"] = self.api_base
        prop = Proposal()
        started = time.monotonic()
        response = None
        for attempt in range(self.retries + 1):
            if request.cancel.is_set():
                prop.error = "cancelled before the LLM answered"
                break
            prop.calls += 1
            try:
                response = litellm.completion(**kwargs)
                break
            except Exception as exc:  # litellm maps every provider error to its own classes
                kind = type(exc).__name__
                message = self._scrub(f"{kind}: {exc}")[:2000]
                prop.error = f"LLM call failed: {message}"
                if kind not in _RETRYABLE:
                    prop.done = True  # a bad key or request: asking again cannot help
                    prop.note = prop.error
                    break
                if attempt == self.retries:
                    break
                if request.cancel.wait(min(60.0, self.backoff * (2 ** attempt))):
                    break
        prop.seconds = time.monotonic() - started
        if response is None:
            return prop
        prop.error = None
        usage = getattr(response, "usage", None)
        prop.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        prop.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        prop.dollars, prop.priced = self._price(litellm, response, prop)
        try:
            text = response.choices[0].message.content
        except (AttributeError, IndexError):
            text = None
        try:
            source = parse_reply(text)
        except ReplyError as exc:
            prop.error = f"reply not usable: {exc}"
            prop.unparsed = self._scrub(text or "")
            return prop
        prop.candidates.append(Candidate(
            id=request.new_id(), source=source, kernel=request.parent.kernel,
            parent=request.parent.id, proposer=self.name,
            strategy=getattr(request.strategy, "name", None), launch={}))
        return prop

    def _price(self, litellm, response, prop: Proposal) -> tuple[float, bool]:
        try:
            cost = litellm.completion_cost(completion_response=response)
            if cost:
                return float(cost), True
        except Exception:  # unmapped model: fall back to the prices given by the user
            pass
        if self.input_cost_per_token is not None or self.output_cost_per_token is not None:
            return (prop.prompt_tokens * (self.input_cost_per_token or 0.0)
                    + prop.completion_tokens * (self.output_cost_per_token or 0.0)), True
        return 0.0, False
