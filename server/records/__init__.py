"""Club records: the projector that folds every game's stream into a records database, the databases
(SQLite by default, PostgreSQL by URL) and the queries the records routes answer."""
