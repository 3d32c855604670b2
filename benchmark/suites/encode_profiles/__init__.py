"""Named ``[encode]`` settings: one TOML file each (package data), named by a suite's ``[encode] profile``."""
