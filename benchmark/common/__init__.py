"""What every layer uses and no layer owns: the one error type (``errors``), name tables (``registry``),
atomic writes (``atomic``), kill points (``kill_points``), content fingerprints (``fingerprint``), a full
disk in one line (``disk``), signals (``signals``), what computed a stage (``environment``), strict TOML
config (``config``) and what every command shares (``command_line``)."""
