"""CFinBench's 43 categories and how any other exam in the same layout names its own.

The names are the official ones (yanbinwei/CFinBench-Eval, `mapping` in the dataset configs;
English names from its README). The Chinese name is what the prompt says ("关于{}的…题").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ...data.errors import DataError
from ...data.io import read_json

QUESTION_TYPES: tuple[str, ...] = ("single_choice", "multi_choice", "judgment")
"""Folder names of the three question types, in the official order."""

TYPE_LABELS: Mapping[str, str] = {"single_choice": "single", "multi_choice": "multiple", "judgment": "judgment"}
"""How each type is named in metric keys (`strict.single`, `strict.multiple`, `strict.judgment`)."""

FIRST_LEVEL: Mapping[str, str] = {
    "1": "Financial Subject",
    "2": "Financial Qualification",
    "3": "Financial Practice",
    "4": "Financial Law",
}
"""The four first-level groups; a category id `G-N` belongs to group `G`."""

OFFICIAL_CATEGORIES: Mapping[str, tuple[str, str]] = {
    "1-1": ("政治经济学", "Political Economics"),
    "1-2": ("西方经济学", "Western Economics"),
    "1-3": ("微观经济学", "Microeconomics"),
    "1-4": ("宏观经济学", "Macroeconomics"),
    "1-5": ("产业经济学", "Industrial Economics"),
    "1-6": ("财政学", "Public Finance"),
    "1-7": ("国际贸易学", "International Trade"),
    "1-8": ("统计学", "Statistics"),
    "1-9": ("审计学", "Auditing"),
    "1-10": ("经济史", "Economic History"),
    "1-11": ("金融学", "Finance"),
    "2-1": ("税务从业资格", "Tax Practitioner Qualification"),
    "2-2": ("期货从业资格", "Futures Practitioner Qualification"),
    "2-3": ("基金从业资格", "Fund Practitioner Qualification"),
    "2-4": ("地产从业资格", "Real Estate Practitioner Qualification"),
    "2-5": ("保险从业资格", "Insurance Practitioner Qualification"),
    "2-6": ("证券从业资格", "Securities Practitioner Qualification"),
    "2-7": ("银行从业资格", "Banking Practitioner Qualification"),
    "2-8": ("注册会计师", "Certified Public Accountant (CPA)"),
    "3-1": ("初级审计师", "Junior Auditor"),
    "3-2": ("中级审计师", "Intermediate Auditor"),
    "3-3": ("初级统计师", "Junior Statistician"),
    "3-4": ("中级统计师", "Intermediate Statistician"),
    "3-5": ("初级经济师", "Junior Economist"),
    "3-6": ("中级经济师", "Intermediate Economist"),
    "3-7": ("初级银行从业人员", "Junior Banking Professional"),
    "3-8": ("中级银行从业人员", "Intermediate Banking Professional"),
    "3-9": ("初级会计师", "Junior Accountant"),
    "3-10": ("中级会计师", "Intermediate Accountant"),
    "3-11": ("税务师", "Tax Consultant"),
    "3-12": ("资产评估师", "Asset Appraiser"),
    "3-13": ("证券分析师", "Securities Analyst"),
    "4-1": ("税法一", "Tax Law I"),
    "4-2": ("税法二", "Tax Law II"),
    "4-3": ("税务稽查", "Tax Inspection"),
    "4-4": ("商业法", "Commercial Law"),
    "4-5": ("证券法", "Securities Law"),
    "4-6": ("保险法", "Insurance Law"),
    "4-7": ("经济法", "Economic Law"),
    "4-8": ("银行业法", "Banking Law"),
    "4-9": ("期货法", "Futures Law"),
    "4-10": ("金融法", "Financial Law"),
    "4-11": ("民法", "Civil Law"),
}
"""Category id -> (Chinese name, English name)."""

CATEGORIES_FILE = "categories.json"
"""Optional file at ROOT naming categories that are not CFinBench's own (written by converters)."""


@dataclass(frozen=True)
class Category:
    """One category (one file stem) of an exam in the CFinBench layout."""

    id: str
    """The file stem, e.g. '1-1' or 'accounting'."""

    zh: str
    """The name the prompt uses ('关于{zh}的单项选择题')."""

    en: str
    """English name for reports."""

    group: str
    """First-level group id ('1'..'4' for CFinBench; what categories.json says, else 'other')."""

    group_name: str
    """Readable name of the group."""


def load_category_names(root: Path) -> dict[str, Category]:
    """The categories declared in ROOT/categories.json ({} when the file does not exist).

    Each entry is either a name (`"accounting": "会计"`) or an object with `zh` and optional
    `en`, `group`, `group_name`."""
    path = root / CATEGORIES_FILE
    if not path.exists():
        return {}
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise DataError("expected a JSON object {category: name | {zh, en, group}}", path=path)
    out: dict[str, Category] = {}
    for key, value in raw.items():
        if key.startswith("_"):  # comments / provenance
            continue
        if isinstance(value, str):
            value = {"zh": value}
        if not isinstance(value, dict) or not isinstance(value.get("zh"), str):
            raise DataError(f"category {key!r}: expected a name or an object with a 'zh' name", path=path,
                            hint='e.g. {"accounting": {"zh": "会计", "en": "Accounting", "group": "CPA"}}')
        group = str(value.get("group", "other"))
        out[key] = Category(key, value["zh"], str(value.get("en", key)), group,
                            str(value.get("group_name", FIRST_LEVEL.get(group, group))))
    return out


def resolve_category(category_id: str, declared: Mapping[str, Category]) -> Category:
    """ROOT/categories.json first, then CFinBench's own names, then the file stem itself."""
    if category_id in declared:
        return declared[category_id]
    if category_id in OFFICIAL_CATEGORIES:
        zh, en = OFFICIAL_CATEGORIES[category_id]
        group = category_id.split("-", 1)[0]
        return Category(category_id, zh, en, group, FIRST_LEVEL[group])
    return Category(category_id, category_id, category_id, "other", "other")
