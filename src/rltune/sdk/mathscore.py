"""Math answer rewards: a TRL-style ``accuracy_reward`` and verl's ``default_compute_score``.

Both are ready-made reward functions; name them in a job as a classpath::

    functions:
      - type: reward
        fcmodel: {classpath: "rltune.sdk.mathscore:accuracy_reward"}
      - type: reward
        fcmodel: {classpath: "rltune.sdk.mathscore:default_compute_score"}

``accuracy_reward(completions, solution, **kwargs)`` has TRL's signature: the answer of each
completion (its last ``\\boxed{…}``, else its last number) is compared with ``solution``; a
solution with no readable answer scores ``None`` (not applicable: the rollout is dropped, not
scored 0). ``default_compute_score(data_source, solution_str, ground_truth, extra_info=None)``
picks the scorer by ``data_source`` as verl does (``SCORERS``): GSM8K's ``#### 72``, boxed
answers (MATH, MATH-500, NuminaMath, Geometry3k) and DAPO's ``Answer: …`` (1 / -1).

Comparison (``answers_match``): with the ``math-verify`` package installed
(``pip install 'rltune[math]'``) answers are parsed and compared symbolically by it; without,
by this module's own rules: LaTeX is normalised (``\\dfrac``→``\\frac``, ``\\left``/``\\right``,
``\\text{…}``, ``^\\circ``, ``$``, spaces, a trailing period), then compared as text, then as
numbers (``1,000``, ``0.5`` = ``\\frac{1}{2}`` = ``1/2``, ``50\\%`` = ``50``). Our own code,
written from the behaviour the two projects document.

Example:
    >>> accuracy_reward([[{"role": "assistant", "content": "so \\\\boxed{\\\\dfrac{1}{2}}"}]],
    ...                 solution=["$0.5$"])
    [1.0]
    >>> default_compute_score("openai/gsm8k", "… so 70 + 2 = 72.\\n#### 72", "72")
    1.0
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction
from typing import Any, Optional

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_boxed(text: str) -> Optional[str]:
    """The content of the last ``\\boxed{…}`` (or ``\\fbox{…}``), braces balanced; None if
    there is none."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    rest = text[start:]
    brace = rest.find("{")
    if brace < 0:  # "\boxed 5"
        m = re.match(r"\\(?:boxed|fbox)\s+([^\s$]+)", rest)
        return m.group(1) if m else None
    depth = 0
    for i in range(brace, len(rest)):
        if rest[i] == "{":
            depth += 1
        elif rest[i] == "}":
            depth -= 1
            if depth == 0:
                return rest[brace + 1:i]
    return None


def last_number(text: str) -> Optional[str]:
    found = _NUMBER.findall(text)
    return found[-1] if found else None


def normalize(answer: str) -> str:
    """A LaTeX answer in a canonical text form (see the module doc)."""
    s = str(answer).strip()
    boxed = last_boxed(s)
    if boxed is not None:
        s = boxed
    s = s.replace("\n", "").strip().strip("$").strip()
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\mbox\{\s*([^{}]*)\}", r"\1", s)
    for old, new in (("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\left", ""),
                     ("\\right", ""), ("^\\circ", ""), ("^{\\circ}", ""), ("\\%", ""),
                     ("%", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\ ", ""),
                     ("\\$", ""), ("degrees", "")):
        s = s.replace(old, new)
    s = re.sub(r"\s+", "", s)
    s = re.sub(r"^[a-zA-Z]\w*=", "", s)  # "x=5" → "5"
    s = s.rstrip(".")
    s = re.sub(r"^\(([A-Za-z])\)$", r"\1", s)  # "(B)" → "B"
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)  # \frac12
    s = re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)
    if re.fullmatch(r"-?\.\d+", s):
        s = s.replace(".", "0.", 1)
    return s


def _as_number(s: str) -> Optional[Fraction]:
    text = s.replace(",", "") if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s) else s
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}", text)
    if m:
        if int(m.group(3)) == 0:
            return None
        value = Fraction(int(m.group(2)), int(m.group(3)))
        return -value if m.group(1) else value
    m = re.fullmatch(r"(-?\d+)/(-?\d+)", text)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _own_match(pred: str, gold: str) -> bool:
    a, b = normalize(pred), normalize(gold)
    if not a or not b:
        return False
    if a == b:
        return True
    x, y = _as_number(a), _as_number(b)
    if x is None or y is None:
        return False
    return abs(x - y) <= Fraction(1, 10**6) * max(Fraction(1), abs(y))


def _math_verify() -> Any:
    try:
        import math_verify
    except ImportError:
        return None
    return math_verify


def answers_match(pred: str, gold: str) -> bool:
    """Whether two answers are equal (math-verify when installed, else own rules)."""
    mv = _math_verify()
    if mv is not None:
        # math-verify's timeouts use signal.alarm, which works in the main thread only
        timeout = 5 if threading.current_thread() is threading.main_thread() else None
        try:
            gold_p = mv.parse(_dollars(gold), parsing_timeout=timeout)
            pred_p = mv.parse(_dollars(pred), parsing_timeout=timeout)
            if gold_p and pred_p and mv.verify(gold_p, pred_p, timeout_seconds=timeout):
                return True
        except Exception:  # math-verify's own parse/timeout errors: fall back to own rules
            pass
    return _own_match(pred, gold)


def _dollars(s: str) -> str:
    s = str(s)
    return s if "$" in s or "\\boxed" in s or "\\(" in s else f"${s}$"


def extract_answer(text: str) -> Optional[str]:
    """A completion's answer: its last ``\\boxed{…}``, else its last number."""
    boxed = last_boxed(text)
    return boxed if boxed is not None else last_number(text)


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: the assistant messages' text
        parts = []
        for m in completion:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if m.get("role", "assistant") == "assistant" and content:
                parts.append(content)
        return "\n".join(parts)
    return str(completion)


def accuracy_reward(completions: list[Any], solution: list[Any],
                    **kwargs: Any) -> list[Optional[float]]:
    """1.0 where a completion's answer equals its ``solution``, 0.0 where not, ``None`` where
    the solution has no readable answer (TRL's signature and contract)."""
    rewards: list[Optional[float]] = []
    for completion, gold in zip(completions, solution, strict=True):
        gold_answer = extract_answer(str(gold)) if not _plain(gold) else str(gold).strip()
        if not gold_answer:
            rewards.append(None)
            continue
        pred = extract_answer(_text(completion))
        rewards.append(float(pred is not None and answers_match(pred, gold_answer)))
    return rewards


def _plain(gold: Any) -> bool:
    """A short reference (three words at most, no box) is an answer as it stands; a longer
    one is a worked solution whose box (else last number) is the answer."""
    s = str(gold).strip()
    return bool(s) and len(s.split()) <= 3 and "\\boxed" not in s


# ---- verl's default_compute_score ----

def gsm8k_score(solution_str: str, ground_truth: str) -> float:
    """GSM8K: the number after the last ``####`` must equal the reference (1.0 / 0.0)."""
    found = re.findall(r"####\s*(-?[0-9.,]+)", solution_str)
    if not found:
        return 0.0
    pred = found[-1].replace(",", "").rstrip(".")
    return float(pred == str(ground_truth).replace(",", "").strip())


def boxed_score(solution_str: str, ground_truth: str) -> float:
    """MATH style: the last ``\\boxed{…}`` must equal the reference (1.0 / 0.0)."""
    pred = last_boxed(solution_str)
    return float(pred is not None and answers_match(pred, str(ground_truth)))


def dapo_score(solution_str: str, ground_truth: str) -> dict[str, float]:
    """DAPO: the text after the last ``Answer:`` (else the last box) must equal the reference;
    1.0 when right, -1.0 when wrong; ``acc`` is 1 or 0."""
    found = re.findall(r"Answer\s*:\s*([^\n]+)", solution_str[-600:])
    pred = found[-1].strip() if found else last_boxed(solution_str)
    right = pred is not None and answers_match(pred, str(ground_truth))
    return {"score": 1.0 if right else -1.0, "acc": float(right)}


def exact_answer_score(solution_str: str, ground_truth: Any) -> float:
    """Search-R1 style QA: the last ``<answer>…</answer>`` equals one of the references
    (case, articles and punctuation ignored)."""
    found = re.findall(r"<answer>(.*?)</answer>", solution_str, flags=re.S)
    if not found:
        return 0.0
    targets = ground_truth.get("target", ground_truth) if isinstance(ground_truth, dict) \
        else ground_truth
    targets = [targets] if isinstance(targets, str) else list(targets)
    return float(_qa_norm(found[-1]) in {_qa_norm(str(t)) for t in targets})


def _qa_norm(s: str) -> str:
    s = re.sub(r"\b(a|an|the)\b", " ", s.lower())
    s = re.sub(r"[^\w\s]", "", s)
    return " ".join(s.split())


#: verl's ``data_source`` values and the scorer each one gets.
SCORERS: dict[str, Any] = {
    "openai/gsm8k": gsm8k_score,
    "lighteval/MATH": boxed_score,
    "DigitalLearningGmbH/MATH-lighteval": boxed_score,
    "HuggingFaceH4/MATH-500": boxed_score,
    "hiyouga/geometry3k": boxed_score,
    "math_dapo": dapo_score,
}
#: ``data_source`` prefixes, checked after exact names.
PREFIX_SCORERS: dict[str, Any] = {
    "aime": dapo_score,
    "numina_": boxed_score,
    "searchR1_": exact_answer_score,
}
#: Sources verl scores by running code; rltune does not run them here.
CODE_SOURCES = ("codecontests", "apps", "codeforces", "taco")


def scorer_for(data_source: str) -> Any:
    """The scorer of a ``data_source``; ``ValueError`` naming the supported ones."""
    if data_source in SCORERS:
        return SCORERS[data_source]
    for prefix, scorer in PREFIX_SCORERS.items():
        if str(data_source).startswith(prefix):
            return scorer
    known = ", ".join([*SCORERS, *(p + "*" for p in PREFIX_SCORERS)])
    if data_source in CODE_SOURCES:
        raise ValueError(f"data_source {data_source!r} is scored by running code, which "
                         "default_compute_score does not do here; write a reward that runs "
                         f"the tests in a sandbox. Supported: {known}")
    raise ValueError(f"no scorer for data_source {data_source!r}; supported: {known}. "
                     "Write your own compute_score for it")


def default_compute_score(data_source: str, solution_str: str, ground_truth: Any,
                          extra_info: Any = None, **kwargs: Any) -> Any:
    """verl's ``default_compute_score``: the score of ``solution_str`` by ``data_source``."""
    return scorer_for(data_source)(solution_str, ground_truth)


__all__ = ["SCORERS", "accuracy_reward", "answers_match", "default_compute_score"]
