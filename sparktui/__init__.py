"""sparktui: a terminal cockpit for vLLM across DGX Spark nodes."""

import warnings

# asyncssh (2.24.1, the newest) names cryptography's DSA types at import; cryptography 51 warns about
# that on every import, which put ten lines of someone else's deprecation on every command's stderr.
# sparktui never offers DSA keys, so the warning says nothing to our user.
warnings.filterwarnings("ignore", message=r"DSA is deprecated", module=r"asyncssh(\.|$)")

__version__ = "0.1.0"
