"""Example task programs that jobs in conf/jobs/ run (``python -m gangmaster.tools.examples.<name>``)."""
