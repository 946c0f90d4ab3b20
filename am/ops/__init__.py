"""What an AM shows of itself while and after it runs: its metrics, the status page and
``/why`` (the diagnosis of a waiting gang and its words), the run report and its log."""
