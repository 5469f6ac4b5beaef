"""Run the master: `pedl master run` calls run_master, which serves the app with uvicorn."""

from __future__ import annotations

import logging
import sys

import uvicorn

from pedl.config.master_config import MasterConfig
from pedl.errors import PedlError


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)


def run_master(config: MasterConfig) -> None:
    setup_logging(config.log_level)
    from pedl.master.app import create_app

    try:
        app = create_app(config)
    except PedlError as exc:
        logging.getLogger("pedl.master").error("%s", exc.message)
        raise SystemExit(1) from None
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning", ws_ping_interval=20,
                ws_ping_timeout=20, timeout_graceful_shutdown=5)
