# Everyday commands; each uses .venv/bin when the project's venv exists, else whatever is on PATH.
BIN := $(if $(wildcard .venv/bin/python),.venv/bin/,)

.PHONY: docs proc test run

# the docs site in _docs/ from nbs/, without Quarto (nbdev_docs does the same where Quarto is installed)
docs:
	$(BIN)python tools/build_docs.py

# nbdev's notebook processing into _proc/ (what nbdev_docs runs before Quarto), with the top-level _quarto.yml
proc:
	$(BIN)python tools/build_docs.py --proc

# the whole suite, as CI runs it
test:
	bash tools/test.sh

# index the sample documents into the kb scope, then chat in the terminal (the README's first command)
run:
	$(BIN)multis index data --scope kb
	$(BIN)multis chat
