"""`lowlevel demo [NAME] [--model] [--trace T.JSON]`: the demos of synchronous and
asynchronous execution. Without a name, the list; with one, that demo runs.

Each demo is a readable script, tools/demos/NAME.py (in a wheel: lowlevel/_demos/), that
runs the same on its own (`python tools/demos/NAME.py`): this command imports it and calls
its main() with the options that follow the name.
"""
import importlib.util
import pathlib
import sys

_PACKAGE = pathlib.Path(__file__).resolve().parents[1]

# In the order the README tells them: each builds on what the one before showed.
DEMOS = ("launch_async", "sync_cost", "pinned_copies", "two_streams", "default_stream", "events_clock",
         "priorities", "graph_replay")


def add_parser(sub) -> None:
    parser = sub.add_parser("demo", help="run a demo of sync and async execution (no name: the list)",
                            description="Demos of sync and async execution; `lowlevel demo NAME --help` for a "
                                        "demo's options.")
    parser.add_argument("name", nargs="?", help="the demo to run; without one, the list")
    parser.add_argument("options", nargs="...", help="the demo's options: --model, --trace T.JSON")
    parser.set_defaults(run=command)


def demos_dir() -> pathlib.Path:
    """Where the demo scripts are: the checkout's tools/demos, or a wheel's lowlevel/_demos."""
    for candidate in (_PACKAGE / "_demos", _PACKAGE.parent / "tools" / "demos"):
        if (candidate / "demo_kit.py").is_file():
            return candidate
    raise FileNotFoundError(f"the demo scripts are missing: looked in {_PACKAGE / '_demos'} and "
                            f"{_PACKAGE.parent / 'tools' / 'demos'}")


def summary(name: str) -> str:
    """The first line of the demo's docstring, read without running it."""
    text = (demos_dir() / f"{name}.py").read_text()
    return text.split('"""', 2)[1].strip().splitlines()[0]


def load(name: str):
    """The demo's module, imported from its file (its folder on sys.path, for demo_kit)."""
    folder = str(demos_dir())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"lowlevel_demo_{name}", demos_dir() / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def command(args) -> int:
    if args.name is None:
        print("lowlevel demo NAME [--model] [--trace T.JSON]; the demos:")
        for name in DEMOS:
            print(f"  {name:16s} {summary(name)}")
        print("--model: on the emulated GPU, modelled H200 device times (LOWLEVEL_EMU_TIMING=model)")
        return 0
    if args.name not in DEMOS:
        print(f"lowlevel demo: no demo {args.name!r}; the demos are {', '.join(DEMOS)}", file=sys.stderr)
        return 2
    return load(args.name).main(args.options)
