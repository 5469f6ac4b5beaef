"""Database layer: SQLAlchemy 2 models, engine and session setup, Alembic migrations."""
