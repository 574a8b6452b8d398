"""``python -m harness_temporal worker --address HOST:PORT --task-queue Q --agent MODULE:ATTR``."""

from harness_temporal.cli import main

if __name__ == "__main__":
    main()
