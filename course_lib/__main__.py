"""Command line: ``python -m course_lib COMMAND [options]``.

Commands:
    reproduce          execute every chapter notebook through papermill (the batch)
    sync-setup-cells   rewrite every notebook's setup cell after changing _config.yml
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    from course_lib import reproduce
    reproduce.add_arguments(commands.add_parser(
        "reproduce", help="execute the chapter notebooks through papermill and record their times"))

    sync = commands.add_parser("sync-setup-cells",
                               help="rewrite the setup cell of every notebook from _config.yml's repository.url")
    sync.set_defaults(func=_sync_setup_cells)

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


def _sync_setup_cells(args) -> int:
    from course_lib.colab import sync_setup_cells
    from course_lib.reproduce import chapter_notebooks

    for path in sync_setup_cells(chapter_notebooks()):
        print(f"updated {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
