"""Configuration models: master.yaml and experiment configs, checked by pydantic."""
