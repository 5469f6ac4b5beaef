"""What the master tells Prometheus about itself: counters and histograms updated where things
happen (master_metrics), state read at scrape time (pool_state), request latency (request_latency)."""
