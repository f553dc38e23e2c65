"""``python -m rsilab``: the command line."""

from rsilab.cli import main

if __name__ == "__main__":
    main()
