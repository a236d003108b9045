"""Node backends: ssh (asyncssh + docker over a forwarded socket), local (psutil), sim (demo)."""
