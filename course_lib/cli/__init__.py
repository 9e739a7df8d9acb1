"""The library's commands, run as ``python -m course_lib ppo | eval | llm`` (see ``course_lib.__main__``)."""
