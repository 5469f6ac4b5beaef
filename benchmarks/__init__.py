"""pedl's benchmarks: each module measures one path (task start, metric ingestion, scheduling) and
prints figures; `python -m benchmarks.run_all` runs them all and prints one markdown table."""
