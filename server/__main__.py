"""``python -m kernelsight.server``: the same as ``kernelsight serve`` (stdio by default)."""
import argparse

from kernelsight.commands import serve

parser = argparse.ArgumentParser(prog="python -m kernelsight.server")
serve.register(parser)
raise SystemExit(serve.run(parser.parse_args()))
