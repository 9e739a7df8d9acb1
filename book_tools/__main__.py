"""The book's commands: ``python -m book_tools COMMAND [options]``.

Commands:
    reproduce          execute every chapter notebook through papermill (the batch)
    check-book         build the book and open every page in headless Chromium (the browser test)
    check-links        check the book's external links (needs the internet; not part of the tests)
    sync-glossary      link each glossary entry back to the chapters that use the term
    sync-setup-cells   rewrite every notebook's setup cell from _config.yml (--url URL sets the address first)
    check-publish      refuse to publish a book whose repository.url is a placeholder or another repository's

The library's own commands (ppo, eval, llm) are ``python -m course_lib``'s.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m book_tools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    from book_tools import reproduce
    reproduce.add_arguments(commands.add_parser(
        "reproduce", help="execute the chapter notebooks through papermill and record their times"))

    from book_tools import book_check
    book_check.add_arguments(commands.add_parser(
        "check-book", help="build the book and open every page in headless Chromium; screenshots in --out"))
    book_check.add_link_arguments(commands.add_parser(
        "check-links", help="check every external link of the book (needs the internet)"))

    from book_tools import glossary
    commands.add_parser("sync-glossary", help="rewrite the glossary's back links to the chapters"
                        ).set_defaults(func=glossary.main)

    from book_tools import colab
    colab.add_sync_arguments(commands.add_parser(
        "sync-setup-cells", help="rewrite the setup cell of every notebook from _config.yml's repository.url"))
    colab.add_check_arguments(commands.add_parser(
        "check-publish", help="check that repository.url is the repository the book is published from "
                              "and that every setup cell clones it (the publishing workflow runs it)"))

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
