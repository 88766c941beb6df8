"""The Claude judge's prompt and reply schema, versioned like the answerer's prompts.

Same rules as ``rag/answer/prompts.py`` (whose :class:`Prompt` this reuses): never edit a
registered version's text in place, add ``claude-judge@<version+1>``; the id and content hash
are recorded on every judged answer, and the tool schema is part of the hash, so a changed
reply format is a changed prompt.
"""

from __future__ import annotations

import hashlib
import json

from ...answer.prompts import Prompt

TOOL_NAME = "record_judgement"
CITATION_VALUES = ("valid", "wrong", "none")  # as the hand labels (label_calibration.CITATION_LABELS)

TOOL_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "grounded": {"type": "boolean", "description": "every claim is supported by the passages its sentence cites"},
        "fabricated": {"type": "boolean", "description": "the answer states a fact that is in no passage at all"},
        "gap_named": {"type": "boolean", "description": "the answer says what the passages do not cover"},
        "correct": {
            "type": ["boolean", "null"],
            "description": "the answer agrees with the reference answer; null when no reference is given",
        },
        "citations": {
            "type": "string",
            "enum": list(CITATION_VALUES),
            "description": "valid: every citation points at a passage that supports its sentence; "
            "wrong: at least one does not; none: the answer cites nothing",
        },
        "sentences": {
            "type": "array",
            "description": "one verdict per numbered answer sentence",
            "items": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "description": "the sentence number"},
                    "support": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 1,
                        "description": "probability that the passages this sentence cites support all of it",
                    },
                    "passage": {
                        "type": ["string", "null"],
                        "description": "id of the passage that best supports the sentence, null if none does",
                    },
                },
                "required": ["n", "support", "passage"],
            },
        },
        "unsupported_spans": {
            "type": "array",
            "items": {"type": "string"},
            "description": "exact substrings of the answer text that no cited passage supports",
        },
        "reason": {"type": "string", "description": "one sentence: the main reason for the verdict"},
    },
    "required": ["grounded", "fabricated", "gap_named", "correct", "citations", "sentences", "unsupported_spans"],
}

_CLAUDE_JUDGE_1 = Prompt(
    name="claude-judge",
    version=1,
    system=(
        "You grade answers that a documentation assistant gave to engineers' questions about "
        "infrastructure software. You judge only against the numbered passages you are given, never "
        "against your own knowledge: a claim that is true in the world but stated in no passage is "
        "unsupported. Paraphrase is fine; a changed number, a negation, a swapped identifier or a wrong "
        "entity is not. You record your verdict with the record_judgement tool and nothing else."
    ),
    instructions=(
        "Grade the answer above to this question: {question}\n"
        "- grounded: true when every answer sentence is supported by the passages its [n] markers cite "
        "(a sentence is supported by the union of the passages it cites). In an answer with markers, a "
        "sentence that cites nothing is unsupported; an answer with no marker at all is judged against "
        "all passages.\n"
        "- fabricated: true when the answer states a fact found in none of the passages (a fact from an "
        "uncited passage is a wrong citation, not a fabrication).\n"
        "- gap_named: true when the answer says what the passages do not cover.\n"
        "- correct: compare with the reference answer when one is given, else null.\n"
        "- citations: valid, wrong or none, as the tool describes.\n"
        "- sentences: for every numbered sentence, the probability (0 to 1) that its cited passages "
        "support all of it, and the id of the best supporting passage.\n"
        "- unsupported_spans: copy the unsupported words exactly as they appear in the answer text, "
        "shortest span that carries the unsupported claim; an empty list when everything is supported."
    ),
)

PROMPTS: dict[str, Prompt] = {p.id: p for p in (_CLAUDE_JUDGE_1,)}
JUDGE_PROMPT = _CLAUDE_JUDGE_1
PROMPT_VERSION = JUDGE_PROMPT.id  # recorded on every judged answer with prompt_hash()


def prompt_hash(prompt: Prompt = JUDGE_PROMPT) -> str:
    """The prompt's own hash extended by the tool schema: a new reply format is a new prompt."""
    text = prompt.hash + json.dumps(TOOL_SCHEMA, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def render_user(question: str, passages: list[tuple[int, str, str]], sentences: list[tuple[str, tuple[int, ...]]],
                answer: str, reference: str, prompt: Prompt = JUDGE_PROMPT) -> str:  # fmt: skip
    """The user turn: passages (position, id, text), the answer verbatim and as numbered
    sentences with their markers, the reference when there is one, then the instructions."""
    parts = ["<passages>"]
    parts += [f'<passage n="{n}" id="{pid}">\n{text}\n</passage>' for n, pid, text in passages]
    parts += ["</passages>", "", f"<answer>\n{answer}\n</answer>", "", "<answer_sentences>"]
    parts += [f"{n}. {text} (cites: {', '.join(map(str, cited)) or 'nothing'})"
              for n, (text, cited) in enumerate(sentences, 1)]  # fmt: skip
    parts.append("</answer_sentences>")
    if reference:
        parts += ["", f"<reference_answer>\n{reference}\n</reference_answer>"]
    return "\n".join([*parts, "", prompt.render(question)])
