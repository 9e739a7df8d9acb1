"""course_lib: the library of the course *Reinforcement learning for code generation*.

One module per idea, named in the book's vocabulary:

- ``tasks``      a task = prompt + entry point + reference solution + tests (chapter 1)
- ``sandbox``    running untrusted generated code safely and fast (chapter 1)
- ``reproduce``  the papermill batch that executes every chapter
- ``colab``      the setup cell every notebook starts with

Importing the package is cheap: heavy modules (torch, transformers) load only
when the module that needs them is imported.
"""

__version__ = "0.1.0"
