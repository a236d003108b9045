"""Test-bed stand-in for the vllm package: only what sparktui reads (version, model registry).
The server itself is sparktui/sim/standin_vllm.py, started by /usr/local/bin/vllm."""
from ._version import __version__  # noqa: F401
