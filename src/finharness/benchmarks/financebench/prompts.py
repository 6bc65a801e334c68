"""FinanceBench's prompts, in one place.

The paper's configurations and their prompts are those of the release's evaluation notebook
(patronus-ai/financebench, evaluation_playground.ipynb, `get_answer`), reproduced character for character,
quirks included: the oracle-reverse prompt closes its filing with `[END OF FILING` (no bracket), and the
question-first prompts put a space before the line break after the question. "Reverse" is the order: the
question-first prompts (oracle, inContext) ask the question and then give the evidence or filing; the reverse
ones give the context first ("Context:") and ask the question after it. Each prompt is one user message, sent
as the notebook's LangChain `model.predict(prompt)` sends it.

The retrieval configurations (singleStore, sharedStore) went through LangChain's `RetrievalQA` with the
"stuff" chain and a chat model: its chat prompt is a system message holding the retrieved chunks and a human
message holding the question (langchain/chains/question_answering/stuff_prompt.py, `CHAT_PROMPT`), the chunks
joined by blank lines (the stuff chain's default document separator). Llama 2 ran through Replicate as a
completion model, where the chain takes the non-chat `PROMPT` instead; both are here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.types import Message

CLOSED_BOOK = "Answer this question: {question}"
ORACLE = ("Answer this question: {question} \nHere is the relevant evidence that you need to answer the question:\n"
          "[START OF FILING] {context} [END OF FILING]")
ORACLE_REVERSE = "Context:\n[START OF FILING] {context} [END OF FILING\n\n Answer this question: {question} \n"
IN_CONTEXT = ("Answer this question: {question} \nHere is the relevant filing that you need to answer the question:\n"
              "[START OF FILING] {context} [END OF FILING]")
IN_CONTEXT_REVERSE = "Context:\n[START OF FILING] {context} [END OF FILING]\n\n Answer this question: {question}\n"

STUFF_CHAT_SYSTEM = ("Use the following pieces of context to answer the user's question. \n"
                     "If you don't know the answer, just say that you don't know, don't try to make up an answer.\n"
                     "----------------\n{context}")
"""LangChain's RetrievalQA 'stuff' chat prompt (system part); the human part is the question alone."""

STUFF_COMPLETION = ("Use the following pieces of context to answer the question at the end. If you don't know the "
                    "answer, just say that you don't know, don't try to make up an answer.\n\n{context}\n\n"
                    "Question: {question}\nHelpful Answer:")
"""The same chain's prompt for a completion model (how Llama 2 was asked through Replicate)."""

DOCUMENT_SEPARATOR = "\n\n"
"""How the stuff chain joins retrieved chunks."""

EVIDENCE_SEPARATOR = "\n\n"
"""How the notebook joins the full pages of a question's evidence for the oracle prompts."""

TEMPLATES = {"closed-book": CLOSED_BOOK, "oracle": ORACLE, "oracle-reverse": ORACLE_REVERSE,
             "in-context": IN_CONTEXT, "in-context-reverse": IN_CONTEXT_REVERSE}
"""The single-prompt configurations by mode name."""

CONTEXT_MARKER = "{context}"


def single_prompt(mode: str, question: str, context: str = "") -> tuple[Message, ...]:
    """The one user message of a closed-book, oracle or in-context configuration."""
    return (Message("user", TEMPLATES[mode].format(question=question, context=context)),)


def prompt_around(mode: str, question: str) -> tuple[str, str]:
    """(text before the context, text after it) of a mode's prompt: what stays when a filing is cut to fit."""
    before, _, after = TEMPLATES[mode].partition(CONTEXT_MARKER)
    return before.format(question=question), after.format(question=question)


def stuff_messages(question: str, chunks: Sequence[str]) -> tuple[Message, ...]:
    """The retrieval configurations' chat prompt: the chunks in the system message, the question as the user's."""
    return (Message("system", STUFF_CHAT_SYSTEM.format(context=DOCUMENT_SEPARATOR.join(chunks))),
            Message("user", question))


AGENT_SYSTEM = (
    "You are a financial analyst answering a question about public companies' SEC filings (10-K, 10-Q, 8-K, "
    "earnings releases). You cannot see the filings directly: use the tools to find the right document and page, "
    "read it, and compute with the calculator or Python where the question needs arithmetic. Filings are named "
    "COMPANY_PERIOD_TYPE (e.g. 3M_2018_10K). When you know the answer, reply with it in plain text, without "
    "calling a tool: state the final figure with its unit, and say so plainly if the filings do not contain it.")
"""finharness's own system prompt for the agentic mode (the paper has no agent)."""


def agent_messages(question: str) -> tuple[Message, ...]:
    """The first turn of an agent episode: the system prompt and the question."""
    return (Message("system", AGENT_SYSTEM), Message("user", question))
