"""Schema tables (Stampede, its MySQL forms, Chimbuko provenance) and the version check."""
