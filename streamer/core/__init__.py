"""The Stampede-free core: what moves records from sources to endpoints without
knowing what they say (`record`: the record/codec protocol; `overflow`: the
bus's per-endpoint overflow file; `options`: option values as typed data;
`dbnaming`: the default database's name). Nothing here imports the rest of
streamer (tests/architecture/test_architecture.py checks it); a codec is injected."""
