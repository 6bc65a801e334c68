"""FinanceBench (Islam et al., 2023, arXiv 2311.11944; patronus-ai/financebench): open-book questions over
public companies' filings, in the paper's configurations, graded against its released human labels."""
