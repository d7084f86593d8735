"""SQLite (the demo) searches chunks with FTS5: an external-content table over the chunk rows
(heading, text; client id unindexed), kept in step by triggers, ranked with bm25. PostgreSQL
uses the chunk's `search_vector` and its GIN index instead: nothing is created there."""

from django.db import migrations

FTS = "knowledge_chunk_fts"
CHUNK = "knowledge_articlechunk"

CREATE = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5("
    "heading, text, client_id UNINDEXED, "
    f"content='{CHUNK}', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER IF NOT EXISTS {FTS}_ai AFTER INSERT ON {CHUNK} BEGIN "
    f"INSERT INTO {FTS}(rowid, heading, text, client_id) "
    "VALUES (new.id, new.heading, new.text, new.client_id); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS}_ad AFTER DELETE ON {CHUNK} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, heading, text, client_id) "
    "VALUES ('delete', old.id, old.heading, old.text, old.client_id); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS}_au AFTER UPDATE OF heading, text, client_id ON {CHUNK} "
    f"BEGIN INSERT INTO {FTS}({FTS}, rowid, heading, text, client_id) "
    "VALUES ('delete', old.id, old.heading, old.text, old.client_id); "
    f"INSERT INTO {FTS}(rowid, heading, text, client_id) "
    "VALUES (new.id, new.heading, new.text, new.client_id); END",
    # Chunks written before this migration.
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]
DROP = [
    f"DROP TRIGGER IF EXISTS {FTS}_ai",
    f"DROP TRIGGER IF EXISTS {FTS}_ad",
    f"DROP TRIGGER IF EXISTS {FTS}_au",
    f"DROP TABLE IF EXISTS {FTS}",
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in CREATE:
            schema_editor.execute(sql)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in DROP:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0003_article_imported_hash")]

    operations = [migrations.RunPython(create, drop)]
