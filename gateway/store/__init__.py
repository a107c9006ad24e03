"""All SQL lives here: the database handle, migrations, and one module per owned table group."""

from gateway.store.database import Database

__all__ = ["Database"]
