from codeeval.cli import entry

entry()
