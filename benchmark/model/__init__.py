"""The backbone and its MLM head: checkpoints by name (``checkpoints``), loaded as ``*ForMaskedLM`` with a
proven head (``loader``), where each family keeps that head (``heads``), its rescaling before training
(``rescale``) and what the rescaling changes (``head_diagnostics``); tiny random backbones
(``synthetic``), packed forwards without padding (``varlen``) and sentence-transformers folders
(``st_modules``)."""
