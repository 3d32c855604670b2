"""The package's version, at the bottom of the house: every command's ``--version`` reads it from here."""

__version__ = "0.1.0"
