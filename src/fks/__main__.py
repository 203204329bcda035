"""``python -m fks`` runs the command line."""

from fks.cli import main

if __name__ == "__main__":
    main()
