"""Test-bed stand-in for transformers: the version and the model-type -> config-class map."""
__version__ = "4.57.1"
