"""Command modules of shared packages that drive floors above their package (run tasks, read run folders, plan
suites): `finharness contamination`, `finharness data`, `finharness plan`. They sit on the command-line floor with
cli.py; a package's commands that need only its own floor and below stay in the package (`rating/cli.py`)."""
