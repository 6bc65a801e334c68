"""`finharness suite`: a named set of tasks run for one or more models, and the scorecard of what it wrote."""
