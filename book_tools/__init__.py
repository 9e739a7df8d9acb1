"""The book's own tooling, kept apart from `course_lib` (the library the chapters teach and import).

    reproduce      the batch: every chapter executed through papermill, their times recorded
    batch_engine   papermill's engine ``course`` that the batch runs notebooks with
    book_check     build the book and open every page in headless Chromium; check its links
    glossary       link each glossary entry back to the chapters that use it
    colab          the setup cell that opens every chapter (on Colab it fetches and installs the course)

The commands stay `python -m course_lib reproduce | check-book | check-links | sync-glossary |
sync-setup-cells`; `course_lib.__main__` hands them to these modules.
"""
