"""``python -m harness_dbos``: the worker and enqueue commands."""

from harness_dbos.cli import main

if __name__ == "__main__":
    main()
