"""Tasks declared in a TOML file instead of code: `finharness run my-exam.toml` (spec.py: the file's keys; task.py:
the task it makes). docs/write-a-task.md leads with them; docs/examples/*.toml are worked examples."""
