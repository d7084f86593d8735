"""The production database backend: Django's PostgreSQL backend whose connection pool discards
every dropped connection at once (`base.DatabaseWrapper`)."""
