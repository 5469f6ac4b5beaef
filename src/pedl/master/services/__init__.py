"""Business logic. Services take a session (or the Database) and own the transactions."""
