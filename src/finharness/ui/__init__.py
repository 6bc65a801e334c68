"""The web app for human raters: blind pairwise verdicts and rubric scores, stored in the run store.

`finharness ui --help` lists the commands. Modules: `storage` (tables, tokens, verdicts), `queue`
(work items from run directories), `app` (FastAPI pages), `exports` (matches, rubric CSV,
human–judge agreement), `cli` (the `ui` command group).
"""
