"""`python -m sciml` is the `sciml` command."""

from sciml.cli import main

if __name__ == "__main__":
    main()
