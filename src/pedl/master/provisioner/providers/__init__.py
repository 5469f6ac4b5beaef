"""Providers: where instances come from. `make_provider` builds the one a pool's config names."""
