"""FinanceBench's open sample as the release lays it out (patronus-ai/financebench @ cc39aeb).

DATA/financebench/data/financebench_open_source.jsonl: 150 questions, one object a line (financebench_id,
company, doc_name, question_type, question_reasoning, question, answer, justification, evidence [{evidence_text,
doc_name, evidence_page_num (0-based), evidence_text_full_page}]); data/financebench_document_information.jsonl:
one line per document (doc_name, company, gics_sector, doc_type, doc_period, doc_link); pdfs/DOC_NAME.pdf: the
filings. The shared copy holds 74 of the 84 filings the sample cites; `absent_documents` names the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...data.errors import DataError
from ...data.io import iter_jsonl, require_key

FOLDER = "financebench"
QUESTIONS_FILE = "data/financebench_open_source.jsonl"
DOCUMENTS_FILE = "data/financebench_document_information.jsonl"
PDF_FOLDER = "pdfs"
QUESTION_TYPES = ("metrics-generated", "domain-relevant", "novel-generated")


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence the annotators marked for a question."""

    doc_name: str
    """The document it is in."""

    page: int
    """Its page, 0-based as the release numbers them (PyMuPDF's page index)."""

    text: str
    """The sentence, paragraph or page the annotator extracted."""

    full_page: str
    """The whole page's text, as the release extracted it: what the paper's oracle configuration shows."""


@dataclass(frozen=True)
class Question:
    """One FinanceBench question with its gold answer and where the answer is."""

    id: str
    """`financebench_id` ('financebench_id_03029')."""

    company: str
    """The company asked about."""

    doc_name: str
    """The document the question is about ('3M_2018_10K')."""

    question: str
    """The question as the model gets it."""

    answer: str
    """The human-annotated gold answer."""

    justification: str
    """The annotator's justification of the answer (not shown to the model)."""

    question_type: str
    """'metrics-generated', 'domain-relevant' or 'novel-generated'."""

    question_reasoning: str
    """The reasoning the question needs, as annotated ('Numerical reasoning', 'Information extraction', ... ;
    'none' where the release gives none)."""

    evidence: tuple[Evidence, ...]
    """The evidence, in the release's order."""

    line: int
    """Line of the questions file (for error messages)."""

    @property
    def documents(self) -> tuple[str, ...]:
        """Every document the question or its evidence names, the question's own first."""
        return tuple(dict.fromkeys((self.doc_name, *(e.doc_name for e in self.evidence))))


@dataclass(frozen=True)
class Document:
    """One filing of the document list."""

    doc_name: str
    company: str
    doc_type: str
    """'10k', '10q', '8k', 'Earnings' ... as the release spells it."""
    period: int
    sector: str
    link: str
    """Where the release found the PDF."""


def questions_path(data_dir: Path) -> Path:
    return Path(data_dir) / FOLDER / QUESTIONS_FILE


def pdf_path(data_dir: Path, doc_name: str) -> Path:
    return Path(data_dir) / FOLDER / PDF_FOLDER / f"{doc_name}.pdf"


def read_questions(data_dir: Path) -> list[Question]:
    """Every question of the open sample in the file's order; DataError naming file and line on bad input."""
    path = questions_path(data_dir)
    questions: list[Question] = []
    seen: set[str] = set()
    for line, obj in iter_jsonl(path):
        qid = str(require_key(obj, "financebench_id", path, line))
        if qid in seen:
            raise DataError(f"duplicate financebench_id {qid!r}", path=path, line=line)
        seen.add(qid)
        evidence = []
        for item in require_key(obj, "evidence", path, line) or ():
            try:
                evidence.append(Evidence(doc_name=str(item.get("doc_name") or item["evidence_doc_name"]),
                                         page=int(item["evidence_page_num"]), text=str(item.get("evidence_text", "")),
                                         full_page=str(item["evidence_text_full_page"])))
            except (KeyError, TypeError, ValueError) as err:
                raise DataError(f"evidence of {qid} cannot be read ({type(err).__name__}: {err})", path=path,
                                line=line) from None
        questions.append(Question(
            id=qid, company=str(obj.get("company", "")), doc_name=str(require_key(obj, "doc_name", path, line)),
            question=str(require_key(obj, "question", path, line)), answer=str(require_key(obj, "answer", path, line)),
            justification=str(obj.get("justification") or ""),
            question_type=str(require_key(obj, "question_type", path, line)),
            question_reasoning=str(obj.get("question_reasoning") or "none"), evidence=tuple(evidence), line=line))
    return questions


def read_documents(data_dir: Path) -> dict[str, Document]:
    """The document list by doc_name."""
    path = Path(data_dir) / FOLDER / DOCUMENTS_FILE
    documents: dict[str, Document] = {}
    for line, obj in iter_jsonl(path):
        name = str(require_key(obj, "doc_name", path, line))
        documents[name] = Document(doc_name=name, company=str(obj.get("company", "")),
                                   doc_type=str(obj.get("doc_type", "")), period=int(obj.get("doc_period") or 0),
                                   sector=str(obj.get("gics_sector", "")), link=str(obj.get("doc_link", "")))
    return documents


def cited_documents(questions: list[Question]) -> list[str]:
    """The documents the questions cite, sorted (the paper's shared store indexes exactly these)."""
    return sorted({name for q in questions for name in q.documents})


def absent_documents(data_dir: Path, questions: list[Question]) -> list[str]:
    """Cited documents whose PDF the data root does not hold."""
    return [name for name in cited_documents(questions) if not pdf_path(data_dir, name).is_file()]


def ensure_data(data_dir: Path, needed_by: str) -> None:
    """Pull the sample on first use when the questions file is missing (the filings come with it)."""
    if questions_path(data_dir).is_file():
        return
    from ...data.pull import pull_on_first_use

    pull_on_first_use("financebench", data_dir, needed_by=needed_by)
