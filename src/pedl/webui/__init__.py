"""The WebUI's built assets (static/, made by `make webui` from web/) and how the master serves them."""
