"""xjobs-sqlite: the SQLite backend for xjobs (`sqlite:///path.db`), on the standard library's sqlite3 or apsw."""
