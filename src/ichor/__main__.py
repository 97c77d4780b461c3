"""``python -m ichor`` is the same program as the ``talosctl`` console script."""

from ichor.cli import main

if __name__ == "__main__":
    main()
