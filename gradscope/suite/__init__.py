"""`gradscope run`: the checks a config declares, read and validated (config.py, precheck.py),
run in worker processes (workers.py) through the public API, one result each (results.py),
selected, sharded and summed up (run.py), and announced to GitHub Actions (github.py)."""
