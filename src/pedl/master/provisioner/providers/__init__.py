"""Providers: where instances come from (base.py is the contract; master/wiring.make_provider builds
the one a pool's config names)."""
