"""What an AM is told: the job spec (OpenPAI's protocol v2 plus our ``gangmaster:`` key), read
and validated into frozen dataclasses, and the ``am:`` section of the configuration."""
