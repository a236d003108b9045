"""Incident drills on the real-vLLM test bed (issue 29 item 4): the table (table.py), the pure
measuring of a recorded run (measure.py, shared with tests/e2e), and the bed and the faults (run.py)."""
