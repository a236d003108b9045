"""An action module that is present but does not import (a half-written module in a build)."""

raise ImportError("this module is broken on purpose")
