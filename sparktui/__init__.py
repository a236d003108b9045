"""sparktui: a terminal cockpit for vLLM across DGX Spark nodes."""

__version__ = "0.1.0"
