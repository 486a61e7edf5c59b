"""Settings (TOML, Pegasus properties), endpoint specs and the state directory."""
